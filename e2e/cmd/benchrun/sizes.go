package main

import (
	"bytes"
	"compress/gzip"
	"errors"
	"os"
)

// sizes are the artefacts' sizes in bytes.
type sizes struct {
	binary, binaryGzip int64
	binaryErr          error
	image              int64
	imageNote          string
}

// measureSizes reads the stripped binary's size and its gzip size: a
// registry stores and a node pulls the layer gzip-compressed, so the gzip
// size of the binary is what its layer costs over the wire. The image's
// size comes from the script (--image-bytes).
func measureSizes(o options) sizes {
	s := sizes{image: o.imageBytes, imageNote: o.imageNote}
	if o.stripped == "" {
		s.binaryErr = errors.New("no stripped binary given")
		return s
	}
	data, err := os.ReadFile(o.stripped)
	if err != nil {
		s.binaryErr = err
		return s
	}
	var zipped bytes.Buffer
	zw := gzip.NewWriter(&zipped)
	_, _ = zw.Write(data) // writing to a bytes.Buffer does not fail
	_ = zw.Close()
	s.binary, s.binaryGzip = int64(len(data)), int64(zipped.Len())
	return s
}
