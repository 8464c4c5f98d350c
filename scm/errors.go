package scm

import (
	"errors"
	"fmt"
)

// ErrNotFound reports that a file, ref, commit or snapshot does not exist in a
// repository. It is always wrapped with the repository and what was looked up.
var ErrNotFound = errors.New("scm: not found")

// ErrDirNotEmpty reports that Checkout was asked to write into a directory that
// already holds files.
var ErrDirNotEmpty = errors.New("scm: checkout directory is not empty")

// ErrInvalidArgument reports a location, ref, sha or path that sluice refuses
// before running any command (empty, option-like, escaping the repository...).
var ErrInvalidArgument = errors.New("scm: invalid argument")

// ErrIgnored reports a webhook delivery that sluice deliberately does not act on
// (ping, branch deletion, pull request labelled, unknown event...). It is
// wrapped with the reason, so the API can answer 202 "ignored: <reason>".
var ErrIgnored = errors.New("scm: webhook ignored")

// ErrSignature reports a webhook delivery whose signature or token header is
// missing or does not match the configured secret (the API answers 401).
var ErrSignature = errors.New("scm: webhook signature invalid")

// ErrBadPayload reports a webhook delivery whose body is not valid JSON, or
// lacks a header or field sluice needs; the wrapping message names the header
// or the JSON field (the API answers 400).
var ErrBadPayload = errors.New("scm: webhook payload invalid")

// MaxFileBytes bounds what ReadFile returns: a larger file (a spec padded to
// exhaust a controller's memory) is refused with ErrTooLarge before its
// content is read. It matches pipeline.MaxSpecBytes.
const MaxFileBytes = 1 << 20

// ErrTooLarge reports a file over MaxFileBytes. It wraps ErrInvalidArgument:
// reading it again will not help.
var ErrTooLarge = fmt.Errorf("%w: file too large", ErrInvalidArgument)

// tooLarge is the error of a file of size bytes over MaxFileBytes.
func tooLarge(size int64) error {
	return fmt.Errorf("%w: %d bytes, the limit is %d (1 MiB)", ErrTooLarge, size, MaxFileBytes)
}
