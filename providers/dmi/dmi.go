// Package dmi reads the firmware identification a Linux kernel exports under
// /sys/class/dmi/id: who made the machine, what it calls itself, and its
// chassis asset tag. Cloud detection falls back to it when no metadata server
// proves a cloud (phase 1).
//
// The directory arrives as an fs.FS (os.DirFS of DMI_DIR_PATH in production,
// fstest.MapFS or testdata trees in tests), so nothing here knows a path. In
// a pod /sys is the node's, so the values describe the node, which is what
// detection wants. The three files read are world-readable (mode 0444); the
// serial numbers and UUID next to them are root-only and deliberately not
// read.
package dmi

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"strings"
)

// DefaultDir is where the Linux kernel exports the DMI files (DMI_DIR_PATH's
// default).
const DefaultDir = "/sys/class/dmi/id"

// The files Read looks at, relative to the DMI directory.
const (
	SysVendorFile       = "sys_vendor"
	ProductNameFile     = "product_name"
	ChassisAssetTagFile = "chassis_asset_tag"
)

// maxFileSize is one page: the kernel never exports a longer attribute.
const maxFileSize = 4096

// Info is what the firmware says about the machine. A field is "" when its
// file is missing, unreadable or empty; Read says which files could not be
// read.
type Info struct {
	SysVendor       string // "Microsoft Corporation", "Google", "Amazon EC2", "Dell Inc."
	ProductName     string // "Virtual Machine", "Google Compute Engine", "m5.large"
	ChassisAssetTag string // Azure: "7783-7084-3265-9085-8269-3286-77"
}

// Empty reports whether no file gave a value, as on machines without DMI
// (most arm64 boards) or when the directory is not mounted.
func (i Info) Empty() bool { return i == Info{} }

// String renders the values for error messages and logs, quoted so that an
// empty or odd value is visible: sys_vendor="Dell Inc." product_name="…"
// chassis_asset_tag="".
func (i Info) String() string {
	return fmt.Sprintf("%s=%q %s=%q %s=%q",
		SysVendorFile, i.SysVendor, ProductNameFile, i.ProductName, ChassisAssetTagFile, i.ChassisAssetTag)
}

// Read reads the three files from fsys. It never fails as a whole: what can
// be read is returned, and the error (nil when every file was read or is
// simply absent) joins one error per file that exists but could not be read,
// each naming the file. Detection logs it and carries on; a missing file is
// not an error because whole DMI directories are missing on some hardware.
// Values are trimmed of white space; bytes that are not UTF-8 are replaced so
// that a value can be logged.
func Read(fsys fs.FS) (Info, error) {
	var info Info
	var errs []error
	for _, f := range []struct {
		name string
		dst  *string
	}{
		{SysVendorFile, &info.SysVendor},
		{ProductNameFile, &info.ProductName},
		{ChassisAssetTagFile, &info.ChassisAssetTag},
	} {
		v, err := readFile(fsys, f.name)
		if err != nil {
			if !errors.Is(err, fs.ErrNotExist) {
				errs = append(errs, fmt.Errorf("dmi: %s: %w", f.name, err))
			}
			continue
		}
		*f.dst = v
	}
	return info, errors.Join(errs...)
}

func readFile(fsys fs.FS, name string) (string, error) {
	f, err := fsys.Open(name)
	if err != nil {
		return "", err
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, maxFileSize+1))
	if err != nil {
		return "", err
	}
	if len(data) > maxFileSize {
		return "", ErrTooLarge
	}
	return strings.TrimSpace(strings.ToValidUTF8(string(data), "\uFFFD")), nil
}
