package azure

import (
	"fmt"
	"net/url"
	"regexp"
	"strings"
)

// ExtensionID is EXTENSION_RESOURCE_ID taken apart:
//
//	/subscriptions/<SubscriptionID>/resourceGroups/<ResourceGroup>/providers/<ClusterProvider>/<ClusterType>/<ClusterName>/providers/Microsoft.KubernetesConfiguration/extensions/<Name>
//
// The subscription cross-checked against IMDS (phase 2) and the resources
// read from ARM (the extension and its managed cluster) are all taken from
// these fields, so they cannot differ.
type ExtensionID struct {
	SubscriptionID  string
	ResourceGroup   string
	ClusterProvider string // e.g. Microsoft.ContainerService
	ClusterType     string // e.g. managedClusters
	ClusterName     string
	Name            string
}

// The ARM naming rules of each segment. They leave no room for "/", "?",
// "#", "%", white space or a segment of dots, so a value that passes cannot
// change the request's path or query.
var (
	subscriptionPattern = regexp.MustCompile(`^[0-9A-Fa-f]{8}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{12}$`)
	// resourceGroupPattern: 1-90 letters, digits, _ - . ( ), not ending in a period.
	resourceGroupPattern = regexp.MustCompile(`^[A-Za-z0-9_.()-]{0,89}[A-Za-z0-9_()-]$`)
	providerPattern      = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9]*(\.[A-Za-z][A-Za-z0-9]*)+$`)
	typePattern          = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9]*$`)
	// namePattern: cluster and extension names, 1-253, starting and ending
	// with a letter or digit.
	namePattern = regexp.MustCompile(`^[A-Za-z0-9]([A-Za-z0-9_.-]{0,251}[A-Za-z0-9])?$`)
)

// ParseExtensionID checks s against the exact ARM grammar of a cluster
// extension's ID and returns its parts. Every problem is reported at once,
// each naming the segment; the error wraps ErrExtensionID. Keywords
// (subscriptions, resourceGroups, providers, the extension type) match
// without regard to case, as ARM matches them.
func ParseExtensionID(s string) (ExtensionID, error) {
	var problems []string
	bad := func() (ExtensionID, error) {
		return ExtensionID{}, fmt.Errorf("%w: %s (want %s)", ErrExtensionID, strings.Join(problems, "; "), extensionIDShape)
	}
	for _, c := range "?#%" {
		if strings.ContainsRune(s, c) {
			problems = append(problems, fmt.Sprintf("%q is not allowed", c))
		}
	}
	for seg := range strings.SplitSeq(s, "/") {
		if seg == "." || seg == ".." {
			problems = append(problems, fmt.Sprintf("a %q segment is not allowed", seg))
			break
		}
	}
	if !strings.HasPrefix(s, "/") {
		problems = append(problems, "must start with /subscriptions/")
	}
	seg := strings.Split(strings.TrimPrefix(s, "/"), "/")
	if len(seg) != 12 {
		problems = append(problems, fmt.Sprintf("has %d path segments, want 12", len(seg)))
	}
	if len(problems) > 0 {
		return bad()
	}
	keyword := func(i int, want string) {
		if !strings.EqualFold(seg[i], want) {
			problems = append(problems, fmt.Sprintf("segment %d is %q, want %q", i+1, seg[i], want))
		}
	}
	value := func(i int, what string, re *regexp.Regexp) string {
		if !re.MatchString(seg[i]) {
			problems = append(problems, fmt.Sprintf("%s %q is not a valid ARM name", what, seg[i]))
		}
		return seg[i]
	}
	keyword(0, "subscriptions")
	keyword(2, "resourceGroups")
	keyword(4, "providers")
	keyword(8, "providers")
	keyword(9, "Microsoft.KubernetesConfiguration")
	keyword(10, "extensions")
	id := ExtensionID{
		SubscriptionID:  value(1, "subscription", subscriptionPattern),
		ResourceGroup:   value(3, "resource group", resourceGroupPattern),
		ClusterProvider: value(5, "cluster provider", providerPattern),
		ClusterType:     value(6, "cluster type", typePattern),
		ClusterName:     value(7, "cluster name", namePattern),
		Name:            value(11, "extension name", namePattern),
	}
	if len(problems) == 0 && !(strings.EqualFold(id.ClusterProvider, managedClusterProvider) && strings.EqualFold(id.ClusterType, managedClusterType)) {
		problems = append(problems, fmt.Sprintf("the cluster is a %s/%s: only an AKS cluster (%s/%s) can be matched with the node "+
			"the engine runs on", id.ClusterProvider, id.ClusterType, managedClusterProvider, managedClusterType))
	}
	if len(problems) > 0 {
		return bad()
	}
	return id, nil
}

// The resource type of the cluster an extension may belong to: phase 2
// reads the managed cluster to match its node resource group with the
// node's (Prover.bindCluster), which only AKS has.
const (
	// extensionType is the only resource type EXTENSION_RESOURCE_ID may name.
	extensionType          = "Microsoft.KubernetesConfiguration/extensions"
	managedClusterProvider = "Microsoft.ContainerService"
	managedClusterType     = "managedClusters"
)

// extensionIDShape is the grammar, for error messages.
const extensionIDShape = "/subscriptions/<subscription GUID>/resourceGroups/<group>/providers/" + managedClusterProvider + "/" +
	managedClusterType + "/<cluster>/providers/" + extensionType + "/<name>"

// Path is the ID as the path of an ARM request, built from the parsed
// segments, each escaped.
func (id ExtensionID) Path() string {
	return escapedPath(id.ClusterPath(), "providers", "Microsoft.KubernetesConfiguration", "extensions", id.Name)
}

// ClusterPath is the ARM request path of the managed cluster the extension
// belongs to (its parent), built like Path from the same parsed segments:
// the subscription phase 2 compared with the node's is the one it names.
func (id ExtensionID) ClusterPath() string {
	return escapedPath("", "subscriptions", id.SubscriptionID, "resourceGroups", id.ResourceGroup,
		"providers", id.ClusterProvider, id.ClusterType, id.ClusterName)
}

// escapedPath appends the segments, each escaped, to prefix (a path built
// by escapedPath, or "").
func escapedPath(prefix string, parts ...string) string {
	for i, p := range parts {
		parts[i] = url.PathEscape(p)
	}
	return prefix + "/" + strings.Join(parts, "/")
}
