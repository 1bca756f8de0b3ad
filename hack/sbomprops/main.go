// Command sbomprops adds the release's properties to a CycloneDX SBOM's
// metadata (hack/release.sh: where the binary comes from, the bases it was
// built on). It reads the SBOM on standard input and writes it to standard
// output with each NAME VALUE pair appended to metadata.properties; the rest
// of the document is kept as it was, and two runs on the same input write
// the same bytes.
//
//	sbomprops NAME VALUE [NAME VALUE ...] < in.cdx.json > out.cdx.json
package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
)

func main() {
	if err := run(os.Args[1:], os.Stdin, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "sbomprops:", err)
		os.Exit(2)
	}
}

type property struct {
	Name  string `json:"name"`
	Value string `json:"value"`
}

func run(args []string, in io.Reader, out io.Writer) error {
	if len(args) == 0 || len(args)%2 != 0 {
		return errors.New("usage: sbomprops NAME VALUE [NAME VALUE ...] < in.cdx.json > out.cdx.json")
	}
	var doc map[string]json.RawMessage
	if err := json.NewDecoder(in).Decode(&doc); err != nil {
		return fmt.Errorf("the SBOM is not a JSON object: %w", err)
	}
	if string(doc["bomFormat"]) != `"CycloneDX"` {
		return errors.New(`the SBOM's bomFormat is not "CycloneDX"`)
	}
	meta := map[string]json.RawMessage{}
	if raw, ok := doc["metadata"]; ok {
		if err := json.Unmarshal(raw, &meta); err != nil {
			return fmt.Errorf("the SBOM's metadata: %w", err)
		}
	}
	var props []property
	if raw, ok := meta["properties"]; ok {
		if err := json.Unmarshal(raw, &props); err != nil {
			return fmt.Errorf("the SBOM's metadata.properties: %w", err)
		}
	}
	for i := 0; i < len(args); i += 2 {
		props = append(props, property{Name: args[i], Value: args[i+1]})
	}
	var err error
	if meta["properties"], err = json.Marshal(props); err != nil {
		return err
	}
	if doc["metadata"], err = json.Marshal(meta); err != nil {
		return err
	}
	// Object keys come out sorted (encoding/json sorts a map's keys), so
	// the output is the same for the same input.
	b, err := json.Marshal(doc)
	if err != nil {
		return err
	}
	var pretty bytes.Buffer
	if err := json.Indent(&pretty, b, "", "  "); err != nil {
		return err
	}
	pretty.WriteByte('\n')
	_, err = out.Write(pretty.Bytes())
	return err
}
