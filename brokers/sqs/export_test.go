package sqs

import "github.com/drover-dev/drover/brokers"

// WithReceipt returns m with its receipt handle replaced, so that a test
// can make SQS refuse it.
func WithReceipt(m brokers.Message, receipt string) brokers.Message {
	h := m.Handle.(handle)
	h.receipt = receipt
	m.Handle = h
	return m
}

// Receipt is m's receipt handle.
func Receipt(m brokers.Message) string { return m.Handle.(handle).receipt }
