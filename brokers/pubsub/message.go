package pubsub

import (
	"slices"

	"cloud.google.com/go/pubsub/v2/apiv1/pubsubpb"

	"github.com/drover-dev/drover/brokers"
)

// convert turns a pulled message into a brokers.Message: ID = Position =
// the message id, Key = the ordering key or else the key attribute,
// Headers = the attributes sorted by name, Time = the publish time,
// Deliveries = the delivery attempt when the service counts it (a
// subscription with a dead-letter policy), Handle = the ack id.
func convert(rm *pubsubpb.ReceivedMessage, keyAttr string) brokers.Message {
	pm := rm.GetMessage()
	m := brokers.Message{
		// The dedupe id. Pub/Sub assigns it when the message is published
		// and documents it as unique within the topic; redeliveries keep
		// it, and the same data published twice gets two ids
		// (TestMessageIDsUniquePerPublish). The subscription (the source)
		// reads one topic, so within a source an id names one message. A
		// topic deleted and created again is outside that guarantee; its
		// old subscriptions are detached and must be made again.
		ID:         pm.GetMessageId(),
		Value:      pm.GetData(),
		Deliveries: int(rm.GetDeliveryAttempt()),
		Handle:     ackID(rm.GetAckId()),
	}
	m.Position = m.ID
	if t := pm.GetPublishTime(); t != nil {
		m.Time = t.AsTime()
	}
	attrs := pm.GetAttributes()
	if k := pm.GetOrderingKey(); k != "" {
		m.Key = []byte(k)
	} else if v, ok := attrs[keyAttr]; ok {
		m.Key = []byte(v)
	}
	if len(attrs) > 0 {
		names := make([]string, 0, len(attrs))
		for k := range attrs {
			names = append(names, k)
		}
		slices.Sort(names)
		m.Headers = make([]brokers.Header, len(names))
		for i, k := range names {
			m.Headers[i] = brokers.Header{Key: k, Value: []byte(attrs[k])}
		}
	}
	return m
}
