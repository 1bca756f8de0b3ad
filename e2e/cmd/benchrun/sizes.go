package main

import (
	"compress/gzip"
	"fmt"
	"io"
	"os"
)

// sizes are the artefacts' sizes in bytes.
type sizes struct {
	binary, binaryGzip int64
	binaryErr          error
	image              int64
	imageNote          string
}

func measureSizes(o options) sizes {
	s := sizes{image: o.imageBytes, imageNote: o.imageNote}
	if o.stripped == "" {
		s.binaryErr = fmt.Errorf("no stripped binary given")
		return s
	}
	fi, err := os.Stat(o.stripped)
	if err != nil {
		s.binaryErr = err
		return s
	}
	s.binary = fi.Size()
	// A registry stores and a node pulls the layer gzip-compressed, so the
	// gzip size of the binary is what its layer costs over the wire.
	s.binaryGzip, err = gzipSize(o.stripped)
	if err != nil {
		s.binaryErr = err
	}
	return s
}

type countingWriter struct{ n int64 }

func (w *countingWriter) Write(p []byte) (int, error) { w.n += int64(len(p)); return len(p), nil }

func gzipSize(path string) (int64, error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, err
	}
	defer func() { _ = f.Close() }()
	var cw countingWriter
	zw := gzip.NewWriter(&cw)
	if _, err := io.Copy(zw, f); err != nil {
		return 0, fmt.Errorf("gzip %s: %w", path, err)
	}
	if err := zw.Close(); err != nil {
		return 0, fmt.Errorf("gzip %s: %w", path, err)
	}
	return cw.n, nil
}
