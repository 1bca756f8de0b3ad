package providers

import "errors"

// ErrNoCloud means detection found no cloud: no metadata server proved one,
// and neither DMI nor dmidecode named one. Detect returns it marked
// failure.Permanent (the machine will not turn into a cloud VM before the
// next attempt), with a message listing every endpoint and its outcome, the
// DMI values seen and the dmidecode outcome, so an operator can tell "IMDS
// blocked" from "not a cloud".
var ErrNoCloud = errors.New("no supported cloud detected")

// ErrInvalidEndpoint means a configured metadata base URL is not of the form
// http://host[:port]; Detect refuses to start (permanent) rather than
// silently treat the cloud as absent.
var ErrInvalidEndpoint = errors.New("invalid metadata endpoint")

// Reasons an IMDS answer is not proof of a cloud. They end up, as text, in
// the ErrNoCloud message; nothing outside this package branches on them.
var (
	errNotProven   = errors.New("answer is not proof")
	errTooLarge    = errors.New("response larger than allowed")
	errNotUTF8     = errors.New("response is not UTF-8")
	errUnavailable = errors.New("no answer within the detection budget")
)
