// Package open hands the concrete reader or receiver an adapter opened on
// as the brokers interface, without the typed nil a failed open would
// otherwise put in it: on an error the interface is nil.
package open

import "github.com/drover-dev/drover/brokers"

// Reader returns r as a brokers.Reader, or nil and err when err is set.
func Reader[R brokers.Reader](r R, err error) (brokers.Reader, error) {
	if err != nil {
		return nil, err
	}
	return r, nil
}

// Receiver returns r as a brokers.Receiver, or nil and err when err is set.
func Receiver[R brokers.Receiver](r R, err error) (brokers.Receiver, error) {
	if err != nil {
		return nil, err
	}
	return r, nil
}
