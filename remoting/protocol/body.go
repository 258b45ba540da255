package protocol

import (
	"errors"
	"fmt"
)

// ErrBadBody means a request or response body that does not parse as the
// structure its code calls for.
var ErrBadBody = errors.New("protocol: bad body")

func wrapBody(what string, err error) error {
	return fmt.Errorf("%w: %s: %v", ErrBadBody, what, err)
}
