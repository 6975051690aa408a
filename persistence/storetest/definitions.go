package storetest

// definitions lists every conformance test of the suite, in the order Run
// runs them; each group's tests are in the file named after it.
func definitions() []definition {
	return []definition{
		// leases.go
		{"Lease/AcquireFree", always, testAcquireFree},
		{"Lease/AcquireHeldByLiveOwner", always, testAcquireHeld},
		{"Lease/AcquireExpired", always, testAcquireExpired},
		{"Lease/ExpiryBoundary", needsClock, testExpiryBoundary},
		{"Lease/AcquireOwn", always, testAcquireOwn},
		{"Lease/TakeoverFromOwnerNotLive", always, testTakeover},
		{"Lease/AcquireNamesPreviousHolder", always, testAcquirePrevious},
		{"Lease/Renew", always, testRenew},
		{"Lease/Release", always, testRelease},
		{"Lease/ListOrderedByUnit", always, testListOrdered},
		{"Lease/InvalidRequests", always, testAcquireInvalid},
		{"Lease/ConcurrentAcquirersOneWins", always, testConcurrentAcquire},

		// renewal.go: lease staleness (AcquireRequest.Stale, Lease.RenewedAt)
		// and batch renewal (RenewLeases).
		{"Lease/RenewedAtSetAndListed", always, testRenewedAt},
		{"Lease/TakeoverWaitsForStaleHolder", always, testTakeoverWaitsForStale},
		{"Lease/StaleBoundary", needsClock, testStaleBoundary},
		{"Lease/RenewingHolderKeepsLease", always, testRenewingHolderKeeps},
		{"Lease/ExpiredOrReleasedTakeableWhateverStale", always, testExpiredReleasedIgnoreStale},
		{"Lease/RenewLeasesRenewedAndLost", always, testRenewLeases},
		{"Lease/RenewLeasesEmptyAndInvalid", always, testRenewLeasesEdges},
		{"Lease/RenewLeasesChangesAnswersOnlyTheDifferences", always, testRenewLeasesChanges},
		{"Lease/RenewLeasesUnitNamedTwice", always, testRenewLeasesTwice},

		// heartbeat.go: the renewal round as a heartbeat (issue 12 item 5).
		{"Lease/HeartbeatKeepsLeaseUntilStale", always, testHeartbeatStale},
		{"Lease/HeartbeatExtendsOnlyLeasesDue", always, testHeartbeatNotDue},
		{"Lease/HeartbeatRoundFindsEveryLoss", always, testHeartbeatLost},
		{"Lease/HeartbeatExpiryNeverLapses", always, testHeartbeatExpiry},
		{"Lease/HeartbeatRoundGivenOtherLeases", always, testHeartbeatOtherLeases},

		// apply.go
		{"Apply/FencedCommitsEverythingTogether", always, testApplyTogether},
		// The fencing and atomicity cases run on both write paths a store may
		// have: a queue batch (dedupe ids) and a stream batch (checkpoint, no
		// dedupe), since a store may write them differently.
		{"Apply/StaleTokenCommitsNothing/Queue", always, testApplyStale(queueBatch)},
		{"Apply/StaleTokenCommitsNothing/Stream", always, testApplyStale(streamBatch)},
		{"Apply/NoLeaseRow/Queue", always, testApplyNoLease(queueBatch)},
		{"Apply/NoLeaseRow/Stream", always, testApplyNoLease(streamBatch)},
		{"Apply/HandlerErrorRollsBackEverything", always, testHandlerError},
		{"Apply/InvalidDocumentRollsBackEverything/Queue", always, testInvalidDoc(queueBatch)},
		{"Apply/InvalidDocumentRollsBackEverything/Stream", always, testInvalidDoc(streamBatch)},
		{"Apply/InvalidTableRefused", always, testInvalidTable},
		{"Apply/FailureMidTransaction/Queue", needsMidTx, testFailMidTx(queueBatch)},
		{"Apply/FailureMidTransaction/Stream", needsMidTx, testFailMidTx(streamBatch)},
		{"Apply/TakeoverDuringApplyIsFenced", always, testTakeoverDuringApply},
		{"Apply/ConcurrentAppliesSerialise", always, testConcurrentApplies},
		{"Handler/TxPutGetDelete", always, testHandlerTx},
		{"Handler/OnlyFreshMessages", always, testHandlerFresh},
		{"Handler/NotCalledWhenFenced", always, testHandlerFenced},
		{"Handler/MessagesWithoutHandleFail", always, testNoHandle},

		// records.go
		{"Records/UpsertByKeyAndDelete", always, testUpsertDelete},
		{"Records/LastOpWinsInBatch", always, testLastOpWins},
		{"Records/UnchangedDocNotRewritten", always, testUnchanged},
		{"Records/Paging", always, testPaging},
		{"Checkpoint/OnlyMovesForward", always, testCheckpointForward},
		{"Checkpoint/SubPositions", always, testCheckpointSubPositions},
		{"Checkpoint/Finished", always, testCheckpointFinished},
		{"Checkpoint/ListBySource", always, testCheckpointsList},

		// reset.go: Batch.Reset and start markers in checkpoints.
		{"Checkpoint/ResetToStartMarkerThenForward", always, testResetToMarker},
		{"Checkpoint/ResetBackwards", always, testResetBackwards},
		{"Checkpoint/ResetFinishedUnit", always, testResetFinished},
		{"Checkpoint/ResetWithRecords", always, testResetWithRecords},
		{"Checkpoint/ResetEmptyRefused", always, testResetEmpty},
		{"Checkpoint/ResetIsFenced", always, testResetFenced},
		{"Checkpoint/ResetRecordsStreamID", always, testResetStreamID},

		// sources.go: Sources.InitSource.
		{"Sources/FirstCallerWins", always, testInitSourceFirstWins},
		{"Sources/ConcurrentCallersAgree", always, testInitSourceConcurrent},

		// other.go
		{"Dedupe/RefusesAnIDTheSecondTime", always, testDedupe},
		{"Dedupe/ForgottenAfterPrune", always, testPrune},
		{"DeadLetters/UniquePerPositionAttemptsGrow", always, testDeadLetterRepeat},
		{"DeadLetters/ListShowMark", always, testDeadLetterManage},
		{"Quality/WriteAndList", always, testQuality},

		// controls.go: persistence.Controls (issue 13).
		{"Controls/PauseResumeRowsAndAudit", always, testControlsPauseResume},
		{"Controls/SeekIDCountsRequests", always, testControlsSeekCounts},
		{"Controls/SeekDoneIsFenced", always, testSeekDone},
		{"Controls/SeekDoneInGroup", always, testSeekDoneGroup},
		{"Controls/ExpireSeekOnceNeverApplied", always, testExpireSeek},
		{"Controls/ExpireSeekByStoreClock", always, testExpireSeekByStoreClock},
		{"Controls/InvalidChangesWriteNothing", always, testControlsInvalid},
		{"Controls/AuditFilters", always, testAuditFilter},
		{"Controls/ConcurrentChangesSerialise", always, testControlsConcurrent},
		{"Controls/SurviveReopen", needsSchema, testControlsSurviveReopen},

		// overlap.go
		{"Dedupe/OverlappingSlotsConcurrently", always, testOverlappingSlots},

		// schema.go
		{"Schema/MigrationsIdempotent", needsSchema, testMigrationsIdempotent},
		{"Schema/NewerVersionRefused", needsSchema, testSchemaTooNew},

		// refuse.go: issue 10 items 6 and 7: dead letters that record the size
		// of a cut payload, and refusals the runtime can tell from failures
		// that may pass (persistence.ErrPermanent).
		{"DeadLetters/CutPayloadRecordsItsSize", always, testDeadLetterCut},
		{"Apply/InvalidDocumentIsPermanent", always, testInvalidDocPermanent},
		{"Apply/RefusedRecordIsPermanent/Queue", needsRefuse, testRefusedRecord(queueBatch)},
		{"Apply/RefusedRecordIsPermanent/Stream", needsRefuse, testRefusedRecord(streamBatch)},
		{"Handler/RefusedPutIsPermanent", needsRefuse, testRefusedPut},

		// group.go: persistence.GroupApplier (issue 12 item 2).
		{"Group/LostLeaseCostsOnlyItsBatch/Queue", always, testGroupLostLease(queueBatch)},
		{"Group/LostLeaseCostsOnlyItsBatch/Stream", always, testGroupLostLease(streamBatch)},
		{"Group/RefusedRecordCostsOnlyItsBatch/Queue", needsRefuse, testGroupRefused(queueBatch)},
		{"Group/RefusedRecordCostsOnlyItsBatch/Stream", needsRefuse, testGroupRefused(streamBatch)},
		{"Group/SeveralFailuresEachCostOnlyTheirBatch/Queue", needsRefuse, testGroupSeveralFailures(queueBatch)},
		{"Group/SeveralFailuresEachCostOnlyTheirBatch/Stream", needsRefuse, testGroupSeveralFailures(streamBatch)},
		{"Group/DedupeAcrossTheGroup", always, testGroupDedupe},
		{"Group/SameUnitTwiceInOrder", always, testGroupSameUnitInOrder},
		{"Group/HandlerBatches", always, testGroupHandler},
	}
}
