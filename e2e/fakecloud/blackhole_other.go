//go:build !linux

package fakecloud

import "errors"

func blackholeListener(string, int) (func(), error) {
	return nil, errors.New("an IPv6 black hole needs Linux")
}
