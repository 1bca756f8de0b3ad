package manifests

import (
	"archive/tar"
	"compress/gzip"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"sigs.k8s.io/yaml"

	"github.com/rancher/registration-engine/internal/testkit"
)

// What carries the version beside VERSION: the chart's version and
// appVersion (the image tag it defaults to) and the bundle's version, which
// Azure compares when it auto-upgrades an extension. They agree, and
// CHANGELOG.md says what the version brought.
func TestVersionsAgree(t *testing.T) {
	version := releaseVersion(t)
	assert.Regexp(t, `^[0-9]+\.[0-9]+\.[0-9]+$`, version, "VERSION is #.#.#, the bundle's format")
	var chart struct{ Version, AppVersion string }
	data, err := os.ReadFile(filepath.Join(chartDir, "Chart.yaml"))
	require.NoError(t, err)
	require.NoError(t, yaml.Unmarshal(data, &chart))
	assert.Equal(t, version, chart.Version, "Chart.yaml version: make stamp writes VERSION there")
	assert.Equal(t, version, chart.AppVersion, "Chart.yaml appVersion: make stamp writes VERSION there")
	assert.Equal(t, version, loadBundleManifest(t).Version, "marketplace/manifest.yaml version: make stamp writes VERSION there")
	changelog, err := os.ReadFile(filepath.Join("..", "CHANGELOG.md"))
	require.NoError(t, err)
	assert.Regexp(t, `(?m)^## \[`+regexp.QuoteMeta(version)+`\]`, string(changelog), "CHANGELOG.md has a section for VERSION")
	cron, err := os.ReadFile(filepath.Join("..", kustomizeCronJob))
	require.NoError(t, err)
	assert.Contains(t, string(cron), "image: registration-engine:"+version+"\n", "the kustomize base's image tag: make stamp writes VERSION there")
	license, err := os.ReadFile(filepath.Join("..", "LICENSE"))
	require.NoError(t, err)
	assert.Contains(t, string(license), "Apache License\n                           Version 2.0, January 2004")
	assert.Contains(t, string(license), "END OF TERMS AND CONDITIONS", "the full text")
}

// kustomizeCronJob is the kustomize base's CronJob, whose image tag is the
// release's version.
const kustomizeCronJob = "manifests/base/cattle-scc-system/cronjob.yaml"

// hack/release.sh stamp writes VERSION where the chart and the bundle keep
// their versions, and nothing else (run on a copy of those files).
func TestReleaseStamp(t *testing.T) {
	root := t.TempDir()
	for _, f := range []string{"hack/release.sh", "manifests/chart/registration-engine/Chart.yaml", "manifests/marketplace/manifest.yaml", kustomizeCronJob} {
		data, err := os.ReadFile(filepath.Join("..", f))
		require.NoError(t, err)
		require.NoError(t, os.MkdirAll(filepath.Dir(filepath.Join(root, f)), 0o755))
		require.NoError(t, os.WriteFile(filepath.Join(root, f), data, 0o755))
	}
	require.NoError(t, os.WriteFile(filepath.Join(root, "VERSION"), []byte("9.8.7\n"), 0o644))
	out, err := exec.Command(filepath.Join(root, "hack", "release.sh"), "stamp").CombinedOutput()
	require.NoError(t, err, "%s", out)

	chartBefore, err := os.ReadFile(filepath.Join(chartDir, "Chart.yaml"))
	require.NoError(t, err)
	chartAfter, err := os.ReadFile(filepath.Join(root, "manifests/chart/registration-engine/Chart.yaml"))
	require.NoError(t, err)
	v := releaseVersion(t)
	want := strings.Replace(strings.Replace(string(chartBefore), "\nversion: "+v+"\n", "\nversion: 9.8.7\n", 1), "\nappVersion: \""+v+"\"\n", "\nappVersion: \"9.8.7\"\n", 1)
	assert.Equal(t, want, string(chartAfter), "only version and appVersion change")
	manifest, err := os.ReadFile(filepath.Join(root, "manifests/marketplace/manifest.yaml"))
	require.NoError(t, err)
	assert.Contains(t, string(manifest), "\nversion: 9.8.7\n")
	cronBefore, err := os.ReadFile(filepath.Join("..", kustomizeCronJob))
	require.NoError(t, err)
	cronAfter, err := os.ReadFile(filepath.Join(root, kustomizeCronJob))
	require.NoError(t, err)
	assert.Equal(t, strings.Replace(string(cronBefore), "image: registration-engine:"+v+"\n", "image: registration-engine:9.8.7\n", 1), string(cronAfter),
		"only the kustomize base's image tag changes")

	require.NoError(t, os.WriteFile(filepath.Join(root, "VERSION"), []byte("1.2\n"), 0o644))
	out, err = exec.Command(filepath.Join(root, "hack", "release.sh"), "stamp").CombinedOutput()
	require.Error(t, err)
	assert.Contains(t, string(out), "VERSION 1.2 is not #.#.#")
}

// cyclonedxBin is CYCLONEDX_GOMOD (make test sets it to what make sbom-tool
// built into the cache), or cyclonedx-gomod on PATH.
func cyclonedxBin(t *testing.T) string {
	t.Helper()
	candidate := os.Getenv("CYCLONEDX_GOMOD")
	return testkit.Tool(t, "cyclonedx-gomod", "CYCLONEDX_GOMOD", candidate, "make sbom-tool")
}

// What make release builds without docker (RELEASE_IMAGE=0), for one
// architecture: the chart package, the binary with its SBOM, the bundle,
// the checksums, all at VERSION.
func TestReleaseBuild(t *testing.T) {
	helm, cdx := helmBin(t), cyclonedxBin(t)
	version := releaseVersion(t)
	certs := regionServerCerts(t)
	build := func(out string, bundle bool) string {
		t.Helper()
		cmd := exec.Command(filepath.Join("..", "hack", "release.sh"), "build", out)
		cmd.Env = append(os.Environ(), "HELM="+helm, "CYCLONEDX_GOMOD="+cdx, "RELEASE_ARCHS=amd64", "RELEASE_IMAGE=0")
		if bundle {
			cmd.Env = append(cmd.Env, "REGISTRY_SERVER=suse.azurecr.io", "ENGINE_IMAGE=rancher/registration-engine",
				"ENGINE_DIGEST=sha256:"+strings.Repeat("ab", 32), "REGION_SERVER_CERTS="+certs.Dir, "REGION_SERVER_FINGERPRINTS="+certs.List,
				"OFFER_PUBLISHER_ID=suse", "OFFER_ID=sles-15-sp7")
		}
		log, err := cmd.CombinedOutput()
		require.NoError(t, err, "%s", log)
		return string(log)
	}
	out := t.TempDir()
	log := build(out, true)
	t.Logf("%s", log)

	// The chart package: stamped, with the LICENSE and the schema.
	chart := untar(t, filepath.Join(out, "registration-engine-"+version+".tgz"))
	var meta struct{ Version, AppVersion string }
	require.NoError(t, yaml.Unmarshal(chart["registration-engine/Chart.yaml"], &meta))
	assert.Equal(t, version, meta.Version)
	assert.Equal(t, version, meta.AppVersion)
	for _, f := range []string{"registration-engine/LICENSE", "registration-engine/values.schema.json", "registration-engine/templates/validate.yaml"} {
		assert.Contains(t, chart, f)
	}

	// The binary says its version.
	bin := filepath.Join(out, "registration-engine-"+version+"-linux-amd64")
	v, err := exec.Command(bin, "--version").CombinedOutput()
	require.NoError(t, err, "%s", v)
	assert.Contains(t, string(v), version)

	// Its SBOM: CycloneDX, the engine at v<VERSION>, its modules.
	var sbom struct {
		BOMFormat, SpecVersion string
		Metadata               struct {
			Component  struct{ Name, Version, Purl string }
			Properties []struct{ Name, Value string }
		}
		Components []struct{ Name, Version, Purl string }
	}
	data, err := os.ReadFile(bin + ".cdx.json")
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(data, &sbom))
	assert.Equal(t, "CycloneDX", sbom.BOMFormat)
	assert.Equal(t, "github.com/rancher/registration-engine", sbom.Metadata.Component.Name)
	assert.Equal(t, "v"+version, sbom.Metadata.Component.Version)
	var names []string
	for _, c := range sbom.Components {
		names = append(names, c.Name)
	}
	assert.Contains(t, names, "k8s.io/client-go", "the modules compiled in")
	assert.Contains(t, names, "std", "the Go standard library compiled in")
	assert.NotContains(t, string(data), `"serialNumber"`, "no random serial number")
	assert.NotContains(t, string(data), `"timestamp"`, "no build time")
	props := map[string]string{}
	for _, p := range sbom.Metadata.Properties {
		props[p.Name] = p.Value
	}
	assert.Equal(t, "built on the release machine with RELEASE_IMAGE=0: no image was built", props["registration-engine:release:binary"],
		"the SBOM says its binary is no image's")
	// The tools that made the release, recorded: two builds agree only
	// for the same tools.
	assert.Regexp(t, `^go1\.`, props["registration-engine:release:go"], "the Go that built the binary")
	assert.Regexp(t, `^v3\.`, props["registration-engine:release:helm"], "the helm that packed the chart")
	assert.Regexp(t, `^v\d+\.`, props["registration-engine:release:cyclonedx-gomod"], "the cyclonedx-gomod that wrote the SBOM")

	// The bundle: stamped manifest, the chart with its certificates.
	bundle := untar(t, filepath.Join(out, "registration-engine-marketplace-"+version+".tar.gz"))
	var manifest bundleManifest
	require.NoError(t, yaml.UnmarshalStrict(bundle["./manifest.yaml"], &manifest))
	assert.Equal(t, version, manifest.Version)
	require.NoError(t, yaml.Unmarshal(bundle["./registration-engine/Chart.yaml"], &meta))
	assert.Equal(t, version, meta.Version)
	for _, s := range bundleRegionServers(t) {
		assert.Contains(t, bundle, "./registration-engine/certs/"+s+".pem")
	}

	sums, err := os.ReadFile(filepath.Join(out, "SHA256SUMS"))
	require.NoError(t, err)
	for _, f := range []string{"registration-engine-" + version + ".tgz", "registration-engine-marketplace-" + version + ".tar.gz",
		"registration-engine-" + version + "-linux-amd64", "registration-engine-" + version + "-linux-amd64.cdx.json"} {
		assert.Contains(t, string(sums), "  "+f+"\n")
	}
	assert.Contains(t, log, "release: image skipped (RELEASE_IMAGE=0): the binaries are built here, not taken from an image")
	assert.Contains(t, log, "release: ENGINE_DIGEST=sha256:"+strings.Repeat("ab", 32)+" not compared with an image: RELEASE_IMAGE=0 built none\n",
		"a bundle whose digest no image was compared with says so")

	// Reproducible: a second build of the same commit elsewhere writes the
	// same bytes, archives included (helm package's and tar's file times
	// are the commit's).
	again := t.TempDir()
	build(again, true)
	sumsAgain, err := os.ReadFile(filepath.Join(again, "SHA256SUMS"))
	require.NoError(t, err)
	assert.Equal(t, string(sums), string(sumsAgain), "two builds of one commit")

	// No stale entry: a build without the bundle into the same directory
	// neither lists nor leaves the earlier build's bundle.
	build(out, false)
	sums, err = os.ReadFile(filepath.Join(out, "SHA256SUMS"))
	require.NoError(t, err)
	assert.NotContains(t, string(sums), "marketplace", "the earlier bundle is not summed")
	assert.NoFileExists(t, filepath.Join(out, "registration-engine-marketplace-"+version+".tar.gz"))
	t.Logf("SHA256SUMS of two builds agree:\n%s", sumsAgain)
}

// A release's image is built from bases named by digest: a tag names
// whatever was pushed under it last, so the same commit would build another
// image tomorrow and nobody could say which base a published image has.
// hack/release.sh refuses every unpinned base at once, before it builds
// anything, unless RELEASE_UNPINNED=1; a pinned set reaches make image with
// each architecture's base. MAKE is a stand-in that records its arguments
// and fails, so no docker is needed.
func TestReleaseBasesPinned(t *testing.T) {
	version := releaseVersion(t)
	pin := func(name, hex string) string { return name + "@sha256:" + strings.Repeat(hex, 32) }
	// The defaults, which the release reads from the Dockerfile as make
	// image does.
	dockerfile, err := os.ReadFile(filepath.Join("..", "Dockerfile"))
	require.NoError(t, err)
	arg := func(name string) string {
		m := regexp.MustCompile(`(?m)^ARG ` + name + `=(.+)$`).FindStringSubmatch(string(dockerfile))
		require.NotNil(t, m, "the Dockerfile's ARG %s", name)
		return m[1]
	}
	buildImage, baseImage := arg("BUILD_IMAGE"), arg("BASE_IMAGE")
	// The frontend is an input too: a "# syntax=" directive makes BuildKit
	// pull it, so it is either absent (the builder's own) or pinned.
	for _, m := range regexp.MustCompile(`(?mi)^#\s*syntax\s*=\s*(\S+)`).FindAllStringSubmatch(string(dockerfile), -1) {
		assert.Regexp(t, `@sha256:[0-9a-f]{64}$`, m[1], "the Dockerfile's frontend (# syntax=) is pulled by a tag that moves: pin it by digest or drop it")
	}
	pinnedBases := map[string]string{
		"BUILD_IMAGE":      pin("golang:1.26", "0a"),
		"BASE_IMAGE":       pin("gcr.io/distroless/static-debian13:nonroot", "1b"),
		"BASE_IMAGE_arm64": pin("gcr.io/distroless/static-debian13:nonroot-arm64", "2c"),
	}
	tests := map[string]struct {
		env        map[string]string
		wantRC     int
		wantOut    []string
		notWantOut []string
		wantMake   []string
	}{
		"the Dockerfile's tags": {
			env:    map[string]string{},
			wantRC: 2,
			wantOut: []string{"release: the image's bases are not pinned by digest:\n",
				"  BUILD_IMAGE=" + buildImage + "\n",
				"  BASE_IMAGE=" + baseImage + " (amd64)\n",
				"  BASE_IMAGE=" + baseImage + " (arm64)\n",
				"or set RELEASE_UNPINNED=1 for a build that is not published"},
			notWantOut: []string{"release: chart"},
		},
		"an arm64 base by tag": {
			env:        map[string]string{"BUILD_IMAGE": pinnedBases["BUILD_IMAGE"], "BASE_IMAGE": pinnedBases["BASE_IMAGE"], "BASE_IMAGE_arm64": "local/static:bookworm-arm64"},
			wantRC:     2,
			wantOut:    []string{"  BASE_IMAGE_arm64=local/static:bookworm-arm64 (arm64)\n", "RELEASE_UNPINNED=1"},
			notWantOut: []string{"BUILD_IMAGE=", "(amd64)", "release: chart"},
		},
		"every base by digest": {
			env:        pinnedBases,
			wantRC:     3,
			wantOut:    []string{"release: chart"},
			notWantOut: []string{"not pinned", "unpinned"},
			wantMake: []string{"image", "IMAGE=registration-engine:" + version, "FAKECLOUD_IMAGE=", "IMAGE_ARCHS=amd64 arm64", "VERSION=" + version,
				"BUILD_IMAGE=" + pinnedBases["BUILD_IMAGE"], "BASE_IMAGE=" + pinnedBases["BASE_IMAGE"],
				"BASE_IMAGE_amd64=" + pinnedBases["BASE_IMAGE"], "BASE_IMAGE_arm64=" + pinnedBases["BASE_IMAGE_arm64"]},
		},
		"tags with RELEASE_UNPINNED=1": {
			env:      map[string]string{"RELEASE_UNPINNED": "1", "BASE_IMAGE": "local/static:bookworm"},
			wantRC:   3,
			wantOut:  []string{"release: unpinned bases accepted (RELEASE_UNPINNED=1), not for publishing: BUILD_IMAGE=" + buildImage + " BASE_IMAGE=local/static:bookworm (amd64) BASE_IMAGE=local/static:bookworm (arm64)\n", "release: chart"},
			wantMake: []string{"BUILD_IMAGE=" + buildImage, "BASE_IMAGE_amd64=local/static:bookworm", "BASE_IMAGE_arm64=local/static:bookworm"},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			r := runReleaseStubbed(t, 3, "", tc.env)
			assert.Equal(t, tc.wantRC, r.rc, "%s", r.out)
			for _, w := range tc.wantOut {
				assert.Contains(t, r.out, w)
			}
			for _, w := range tc.notWantOut {
				assert.NotContains(t, r.out, w)
			}
			args, err := os.ReadFile(r.makeStub + ".args")
			if tc.wantMake == nil {
				assert.ErrorIs(t, err, os.ErrNotExist, "make image must not run")
				return
			}
			require.NoError(t, err, "make image ran")
			for _, w := range tc.wantMake {
				assert.Contains(t, strings.Split(string(args), "\n"), w, "make image's arguments")
			}
		})
	}
}

// stubbedRelease is what a run of hack/release.sh with stubs did.
type stubbedRelease struct {
	out      string // its output, standard error included
	rc       int    // its exit code
	makeStub string // the make stub; makeStub+".args" holds its arguments, one a line, when it ran
	docker   string // what the docker stub was asked, one call a line
}

// runReleaseStubbed runs hack/release.sh build with RELEASE_IMAGE=1 for
// amd64 and arm64 (env adds to or replaces those settings; the caller's
// bases, RELEASE_UNPINNED and MAKE are dropped), with two stand-ins that
// need no docker: MAKE, which records its arguments and exits makeRC, and
// DOCKER, which answers docker image inspect for a linux/amd64 image whose
// registry digests (RepoDigests) are repoDigests, one a line, and fails
// with exit code 4 on anything else (docker create: where the release
// would copy the engine out of the image).
func runReleaseStubbed(t *testing.T, makeRC int, repoDigests string, env map[string]string) stubbedRelease {
	t.Helper()
	helm, cdx := helmBin(t), cyclonedxBin(t)
	dir := t.TempDir()
	makeStub, docker := filepath.Join(dir, "make"), filepath.Join(dir, "docker")
	require.NoError(t, os.WriteFile(makeStub, fmt.Appendf(nil, "#!/bin/sh\nprintf '%%s\\n' \"$@\" > \"$0.args\"\nexit %d\n", makeRC), 0o755))
	require.NoError(t, os.WriteFile(docker+".digests", []byte(repoDigests), 0o644))
	require.NoError(t, os.WriteFile(docker, []byte(`#!/bin/sh
echo "$*" >> "$0.calls"
[ "$1 $2" = "image inspect" ] || exit 4
case "$4" in
*RepoDigests*) echo sha256:`+strings.Repeat("9e", 32)+`; cat "$0.digests" ;;
*.Os*) echo linux/amd64 ;;
esac
`), 0o755))
	cmd := exec.Command(filepath.Join("..", "hack", "release.sh"), "build", filepath.Join(dir, "out"))
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		if k == "BUILD_IMAGE" || strings.HasPrefix(k, "BASE_IMAGE") || k == "RELEASE_UNPINNED" || strings.HasPrefix(k, "MAKE") || k == "ENGINE_DIGEST" || k == "PATH" {
			continue
		}
		cmd.Env = append(cmd.Env, kv)
	}
	// The stand-in is docker on PATH too: no docker the test did not write
	// is ever run.
	cmd.Env = append(cmd.Env, "HELM="+helm, "CYCLONEDX_GOMOD="+cdx, "RELEASE_ARCHS=amd64 arm64", "RELEASE_IMAGE=1", "MAKE="+makeStub, "DOCKER="+docker,
		"PATH="+dir+string(os.PathListSeparator)+os.Getenv("PATH"))
	for k, v := range env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	out, err := cmd.CombinedOutput()
	var exit *exec.ExitError
	require.ErrorAs(t, err, &exit, "%s", out)
	calls, err := os.ReadFile(docker + ".calls")
	if !errors.Is(err, os.ErrNotExist) {
		require.NoError(t, err)
	}
	return stubbedRelease{out: string(out), rc: exit.ExitCode(), makeStub: makeStub, docker: string(calls)}
}

// The bundle pins the engine by ENGINE_DIGEST, which a publisher copies
// from make image-push's output: a digest from another build, another
// version or a typo would ship an image this release did not build. When
// it builds the image, hack/release.sh compares ENGINE_DIGEST with the
// registry digests docker recorded for the amd64 image just built, and
// refuses a mismatch, naming both and the fix, before it copies anything
// out of the image. The digest source is a docker stand-in: no registry or
// docker daemon is needed, and none is reached.
func TestReleaseEngineDigestIsTheBuiltImages(t *testing.T) {
	version := releaseVersion(t)
	tag := "registry.example/rancher/registration-engine:" + version + "-amd64"
	pushed, other := "sha256:"+strings.Repeat("ab", 32), "sha256:"+strings.Repeat("cd", 32)
	tests := map[string]struct {
		repoDigests string
		env         map[string]string
		wantRC      int
		wantOut     []string
		notWantOut  []string
	}{
		"the digest it was pushed as": {
			repoDigests: "registry.example/rancher/registration-engine@" + pushed + "\n",
			wantRC:      4, // past the check, at docker create
			wantOut:     []string{"release: ENGINE_DIGEST=" + pushed + " is the digest of " + tag + " (registry.example/rancher/registration-engine@" + pushed + ")\n"},
		},
		"another image's digest": {
			repoDigests: "registry.example/rancher/registration-engine@" + other + "\n",
			wantRC:      2,
			wantOut: []string{"release: ENGINE_DIGEST=" + pushed + " is not the digest of the image this build made, " + tag + " (image ID sha256:" + strings.Repeat("9e", 32) + "), which was pushed as:\n" +
				"  registry.example/rancher/registration-engine@" + other + "\n" +
				"  push this build's images (make image-push IMAGE=registry.example/rancher/registration-engine:" + version + ") and run again with ENGINE_DIGEST set to the digest it printed for " + tag},
		},
		"an image never pushed": {
			wantRC:  2,
			wantOut: []string{"release: ENGINE_DIGEST=" + pushed + " is not the digest of the image this build made, " + tag + " (image ID sha256:" + strings.Repeat("9e", 32) + "): that image has no registry digest (it was not pushed, or this build made a new one)\n"},
		},
		"no amd64 image built": {
			repoDigests: "registry.example/rancher/registration-engine@" + pushed + "\n",
			env:         map[string]string{"RELEASE_ARCHS": "arm64"},
			wantRC:      2,
			wantOut:     []string{"release: ENGINE_DIGEST names the bundle's linux/amd64 image, but RELEASE_ARCHS=\"arm64\" builds none: add amd64\n"},
			notWantOut:  []string{"release: chart"}, // refused before anything is built
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			env := map[string]string{"IMAGE_REPO": "registry.example/rancher/registration-engine", "ENGINE_DIGEST": pushed,
				"BUILD_IMAGE": "golang:1.26@sha256:" + strings.Repeat("0a", 32), "BASE_IMAGE": "gcr.io/distroless/static-debian13:nonroot@sha256:" + strings.Repeat("1b", 32)}
			maps.Copy(env, tc.env)
			r := runReleaseStubbed(t, 0, tc.repoDigests, env)
			assert.Equal(t, tc.wantRC, r.rc, "%s", r.out)
			for _, w := range tc.wantOut {
				assert.Contains(t, r.out, w)
			}
			for _, w := range tc.notWantOut {
				assert.NotContains(t, r.out, w)
			}
			if tc.wantRC == 2 {
				assert.NotContains(t, r.docker, "create", "nothing is copied out of an image the bundle would not name")
			} else {
				assert.Contains(t, r.docker, "create --platform linux/amd64 "+tag, "the release goes on to the binaries")
			}
			t.Logf("proved: hack/release.sh with ENGINE_DIGEST and %s exits %d:\n%s", name, r.rc, r.out)
		})
	}
}

// untar reads a .tar.gz into file name → content.
func untar(t *testing.T, path string) map[string][]byte {
	t.Helper()
	f, err := os.Open(path)
	require.NoError(t, err)
	defer f.Close()
	gz, err := gzip.NewReader(f)
	require.NoError(t, err)
	tr := tar.NewReader(gz)
	files := map[string][]byte{}
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		require.NoError(t, err)
		if h.Typeflag != tar.TypeReg {
			continue
		}
		data, err := io.ReadAll(tr)
		require.NoError(t, err)
		files[h.Name] = data
	}
	return files
}
