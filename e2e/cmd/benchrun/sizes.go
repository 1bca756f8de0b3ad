package main

import (
	"bytes"
	"compress/gzip"
	"errors"
	"fmt"
	"os"
)

// sizes are the artefacts' sizes in bytes.
type sizes struct {
	Binary, BinaryGzip int64
	BinaryErr          error
	Image              int64
	ImageNote          string
}

// measureSizes reads the stripped binary's size and its gzip size: a
// registry stores and a node pulls the layer gzip-compressed, so the gzip
// size of the binary is what its layer costs over the wire. The image's
// size comes from the script (--image-bytes).
func measureSizes(o options) sizes {
	s := sizes{Image: o.ImageBytes, ImageNote: o.ImageNote}
	if o.Stripped == "" {
		s.BinaryErr = errors.New("no stripped binary given")
		return s
	}
	data, err := os.ReadFile(o.Stripped)
	if err != nil {
		s.BinaryErr = err
		return s
	}
	var zipped bytes.Buffer
	zw := gzip.NewWriter(&zipped)
	_, _ = zw.Write(data) // writing to a bytes.Buffer does not fail
	_ = zw.Close()
	s.Binary, s.BinaryGzip = int64(len(data)), int64(zipped.Len())
	return s
}

// ImageSize is the image's size and how it was measured.
func (s sizes) ImageSize() string { return fmt.Sprintf("%s (%s)", fmtBytes(s.Image), s.ImageNote) }
