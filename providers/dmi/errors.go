package dmi

import "errors"

// ErrTooLarge means a DMI file was larger than a sysfs attribute can be
// (one page): the directory is not /sys/class/dmi/id.
var ErrTooLarge = errors.New("dmi: file larger than a sysfs attribute")
