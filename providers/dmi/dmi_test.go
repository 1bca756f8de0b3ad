package dmi

import (
	"io/fs"
	"os"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rancher/registration-engine/internal/testkit"
)

func TestReadTrees(t *testing.T) {
	tests := map[string]struct {
		dir  string
		want Info
	}{
		"azure":     {"azure", Info{"Microsoft Corporation", "Virtual Machine", "7783-7084-3265-9085-8269-3286-77"}},
		"gcp":       {"gcp", Info{"Google", "Google Compute Engine", ""}},
		"aws":       {"aws", Info{"Amazon EC2", "m5.large", "Amazon EC2"}},
		"baremetal": {"baremetal", Info{"Dell Inc.", "PowerEdge R640", ""}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got, err := Read(os.DirFS("testdata/" + tc.dir))
			require.NoError(t, err)
			assert.Equal(t, tc.want, got)
		})
	}
}

// permissionFS fails every open like a root-only sysfs file does for an
// unprivileged pod.
type permissionFS struct{}

func (permissionFS) Open(name string) (fs.File, error) {
	return nil, &fs.PathError{Op: "open", Path: name, Err: fs.ErrPermission}
}

func TestRead(t *testing.T) {
	tests := map[string]struct {
		fsys      fs.FS
		want      Info
		wantErrIs error // nil: no error; else the error must wrap it
	}{
		"values trimmed": {
			fsys: fstest.MapFS{
				"sys_vendor":   {Data: []byte("  Google \n")},
				"product_name": {Data: []byte("Google Compute Engine\n")},
			},
			want: Info{SysVendor: "Google", ProductName: "Google Compute Engine"},
		},
		"no DMI directory content is not an error": {fsys: fstest.MapFS{}, want: Info{}},
		"unreadable file tolerated, others read": {
			fsys: fstest.MapFS{
				"sys_vendor/x":      {Data: []byte("a directory where a file should be")},
				"chassis_asset_tag": {Data: []byte("7783-7084-3265-9085-8269-3286-77\n")},
			},
			want:      Info{ChassisAssetTag: "7783-7084-3265-9085-8269-3286-77"},
			wantErrIs: fs.ErrInvalid, // reading a directory
		},
		"permission denied": {
			fsys: permissionFS{}, want: Info{}, wantErrIs: fs.ErrPermission,
		},
		"larger than a sysfs attribute": {
			fsys:      fstest.MapFS{"product_name": {Data: []byte(strings.Repeat("x", maxFileSize+1))}},
			want:      Info{},
			wantErrIs: ErrTooLarge,
		},
		"not UTF-8 replaced": {
			fsys: fstest.MapFS{"sys_vendor": {Data: []byte("Acme\xff\xfe\n")}},
			want: Info{SysVendor: "Acme\uFFFD"},
		},
	}
	msgs := testkit.NewMessages(t)
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got, err := Read(tc.fsys)
			assert.Equal(t, tc.want, got)
			if tc.wantErrIs == nil {
				assert.NoError(t, err)
				return
			}
			require.ErrorIs(t, err, tc.wantErrIs)
			msgs.Add(name, err) // names the file
		})
	}
}

func TestInfoString(t *testing.T) {
	assert.Equal(t, `sys_vendor="Dell Inc." product_name="" chassis_asset_tag=""`, Info{SysVendor: "Dell Inc."}.String())
	assert.True(t, Info{}.Empty())
	assert.False(t, Info{ProductName: "x"}.Empty())
}
