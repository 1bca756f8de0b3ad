package fakecloud_test

import (
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"github.com/smallstep/pkcs7"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rancher/registration-engine/e2e/fakecloud"
)

func newAzure(t *testing.T) *fakecloud.Azure {
	t.Helper()
	a, err := fakecloud.NewAzure(fakecloud.AzureConfig{})
	require.NoError(t, err)
	return a
}

func get(t *testing.T, rawURL string, header map[string]string) (*http.Response, []byte) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, rawURL, nil)
	require.NoError(t, err)
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp, b
}

func TestAzureIMDSBehavesLikeIMDS(t *testing.T) {
	a := newAzure(t)
	srv := httptest.NewServer(a.IMDSHandler())
	t.Cleanup(srv.Close)
	md := map[string]string{"Metadata": "true"}
	tests := map[string]struct {
		path   string
		header map[string]string
		status int
		body   string
	}{
		"compute":                  {"/metadata/instance/compute?api-version=2021-02-01", md, 200, `"subscriptionId":"ce73a2b0-d2e7-4ff6-b987-b32d6908de4e"`},
		"instance":                 {"/metadata/instance?api-version=2021-02-01", md, 200, `"vmId":"e01fcd50-213b-4559-8fdf-d98c0086cde4"`},
		"location as text":         {"/metadata/instance/compute/location?api-version=2021-02-01&format=text", md, 200, "westeurope"},
		"leaf without format=text": {"/metadata/instance/compute/location?api-version=2021-02-01", md, 400, "format=text"},
		"versions need no version": {"/metadata/versions", md, 200, `"apiVersions"`},
		"no Metadata header":       {"/metadata/instance/compute?api-version=2021-02-01", nil, 400, "Required metadata header"},
		"Metadata header not true": {"/metadata/instance/compute?api-version=2021-02-01", map[string]string{"Metadata": "yes"}, 400, ""},
		"X-Forwarded-For":          {"/metadata/instance/compute?api-version=2021-02-01", map[string]string{"Metadata": "true", "X-Forwarded-For": "10.0.0.1"}, 400, ""},
		"no api-version":           {"/metadata/instance/compute", md, 400, "newest-versions"},
		"duplicate api-version":    {"/metadata/instance/compute?api-version=2021-02-01&api-version=2021-02-01", md, 400, ""},
		"nonce longer than 32":     {"/metadata/attested/document?api-version=2021-02-01&nonce=" + strings.Repeat("a", 33), md, 400, ""},
		"unknown path":             {"/metadata/nothing?api-version=2021-02-01", md, 404, ""},
		"attested document":        {"/metadata/attested/document?api-version=2021-02-01&nonce=abc", md, 200, `"encoding":"pkcs7"`},
		"aia needs no header":      {"/aia/intermediate.crt", nil, 200, ""},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			resp, body := get(t, srv.URL+tc.path, tc.header)
			assert.Equal(t, tc.status, resp.StatusCode, string(body))
			assert.Contains(t, string(body), tc.body)
		})
	}
}

func TestAzureIMDSFaultCounters(t *testing.T) {
	a := newAzure(t)
	srv := httptest.NewServer(a.IMDSHandler())
	t.Cleanup(srv.Close)
	a.IMDS429.Store(1)
	a.IMDS410.Store(1)
	var got []int
	for range 3 {
		resp, _ := get(t, srv.URL+"/metadata/instance/compute?api-version=2021-02-01", map[string]string{"Metadata": "true"})
		got = append(got, resp.StatusCode)
	}
	assert.Equal(t, []int{429, 410, 200}, got)
}

// TestAzureAttestedDocumentIsShapedLikeAzures checks the envelope details a
// verifier must cope with: leaf only, one signer without authenticated
// attributes, sha256WithRSAEncryption as digest OID, AIA to the intermediate.
func TestAzureAttestedDocumentIsShapedLikeAzures(t *testing.T) {
	a := newAzure(t)
	srv := httptest.NewServer(a.IMDSHandler())
	t.Cleanup(srv.Close)
	_, body := get(t, srv.URL+"/metadata/attested/document?api-version=2021-02-01&nonce=2jejosSbpvfywfLc2RcplWnHyDyAxWS_",
		map[string]string{"Metadata": "true"})
	var doc struct{ Encoding, Signature string }
	require.NoError(t, json.Unmarshal(body, &doc))
	der, err := base64.StdEncoding.DecodeString(doc.Signature)
	require.NoError(t, err)
	p7, err := pkcs7.Parse(der)
	require.NoError(t, err)

	require.Len(t, p7.Certificates, 1, "only the leaf travels in the envelope")
	require.Len(t, p7.Signers, 1)
	s := p7.Signers[0]
	assert.Empty(t, s.AuthenticatedAttributes)
	assert.Equal(t, "1.2.840.113549.1.1.11", s.DigestAlgorithm.Algorithm.String(), "the quirk: a signature OID as digest OID")
	assert.Equal(t, "1.2.840.113549.1.1.1", s.DigestEncryptionAlgorithm.Algorithm.String())
	assert.NoError(t, p7.Verify(), "the signature covers the content")

	var content map[string]any
	require.NoError(t, json.Unmarshal(p7.Content, &content))
	assert.Equal(t, "2jejosSbpvfywfLc2RcplWnHyDyAxWS_", content["nonce"])

	leaf := p7.Certificates[0]
	assert.Equal(t, "metadata.azure.com", leaf.Subject.CommonName)
	require.Len(t, leaf.IssuingCertificateURL, 1)
	u, err := url.Parse(leaf.IssuingCertificateURL[0])
	require.NoError(t, err)
	assert.Equal(t, strings.TrimPrefix(srv.URL, "http://"), u.Host, "the AIA URL names the address the client used")
	resp, interDER := get(t, leaf.IssuingCertificateURL[0], nil)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	inter, err := x509.ParseCertificate(interDER)
	require.NoError(t, err)
	roots := x509.NewCertPool()
	roots.AddCert(a.Root())
	inters := x509.NewCertPool()
	inters.AddCert(inter)
	_, err = leaf.Verify(x509.VerifyOptions{Roots: roots, Intermediates: inters, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageAny}})
	assert.NoError(t, err)

	a.TamperDocument.Store(true)
	_, body = get(t, srv.URL+"/metadata/attested/document?api-version=2021-02-01&nonce=x", map[string]string{"Metadata": "true"})
	require.NoError(t, json.Unmarshal(body, &doc))
	der, err = base64.StdEncoding.DecodeString(doc.Signature)
	require.NoError(t, err)
	p7, err = pkcs7.Parse(der)
	require.NoError(t, err)
	assert.Error(t, p7.Verify(), "a tampered document no longer verifies")
	assert.True(t, json.Valid(p7.Content), "but its content still parses")
}

func TestAzureEntra(t *testing.T) {
	a := newAzure(t)
	srv := httptest.NewTLSServer(a.EntraHandler())
	t.Cleanup(srv.Close)
	cfg := a.Config()

	resp, body := getTLS(t, srv, "/"+cfg.TenantID+"/v2.0/.well-known/openid-configuration")
	require.Equal(t, http.StatusOK, resp.StatusCode)
	var oidc map[string]any
	require.NoError(t, json.Unmarshal(body, &oidc))
	assert.Equal(t, srv.URL+"/"+cfg.TenantID+"/v2.0", oidc["issuer"], "MSAL requires the issuer host to be the authority host")

	good := url.Values{
		"grant_type":            {"client_credentials"},
		"client_id":             {cfg.ClientID},
		"client_assertion_type": {"urn:ietf:params:oauth:client-assertion-type:jwt-bearer"},
		"client_assertion":      {cfg.FederatedToken},
		"scope":                 {"https://management.azure.com/.default openid offline_access profile"},
	}
	tests := map[string]struct {
		change func(v url.Values)
		status int
		want   string
	}{
		"valid assertion":      {func(url.Values) {}, 200, cfg.AccessToken},
		"wrong assertion":      {func(v url.Values) { v.Set("client_assertion", "x") }, 400, "AADSTS70021"},
		"wrong client":         {func(v url.Values) { v.Set("client_id", "x") }, 400, "AADSTS700016"},
		"wrong grant":          {func(v url.Values) { v.Set("grant_type", "password") }, 400, "unsupported_grant_type"},
		"wrong assertion type": {func(v url.Values) { v.Set("client_assertion_type", "x") }, 400, "invalid_request"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			v := url.Values{}
			for k, vs := range good {
				v[k] = append([]string(nil), vs...)
			}
			tc.change(v)
			resp, err := srv.Client().PostForm(srv.URL+"/"+cfg.TenantID+"/oauth2/v2.0/token", v)
			require.NoError(t, err)
			defer resp.Body.Close()
			b, _ := io.ReadAll(resp.Body)
			assert.Equal(t, tc.status, resp.StatusCode)
			assert.Contains(t, string(b), tc.want)
		})
	}
}

func getTLS(t *testing.T, srv *httptest.Server, path string, header ...string) (*http.Response, []byte) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, srv.URL+path, nil)
	require.NoError(t, err)
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := srv.Client().Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp, b
}

func TestAzureARM(t *testing.T) {
	a := newAzure(t)
	srv := httptest.NewTLSServer(a.ARMHandler())
	t.Cleanup(srv.Close)
	cfg := a.Config()
	path := cfg.ExtensionResourceID + "?api-version=" + fakecloud.ExtensionAPIVersion
	bearer := []string{"Authorization", "Bearer " + cfg.AccessToken}

	resp, _ := getTLS(t, srv, path)
	assert.Equal(t, http.StatusUnauthorized, resp.StatusCode, "no token")

	resp, body := getTLS(t, srv, path, bearer...)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	var ext struct {
		Plan *fakecloud.AzurePlan `json:"plan"`
	}
	require.NoError(t, json.Unmarshal(body, &ext))
	require.NotNil(t, ext.Plan)
	assert.Equal(t, cfg.Plan, *ext.Plan, "plan is top-level, a sibling of properties")

	a.NoPlan.Store(true)
	_, body = getTLS(t, srv, path, bearer...)
	assert.NotContains(t, string(body), `"plan"`)
	a.NoPlan.Store(false)

	a.ARM429.Store(1)
	resp, _ = getTLS(t, srv, path, bearer...)
	assert.Equal(t, http.StatusTooManyRequests, resp.StatusCode)
	assert.Equal(t, "1", resp.Header.Get("Retry-After"))
	resp, _ = getTLS(t, srv, path, bearer...)
	assert.Equal(t, http.StatusOK, resp.StatusCode, "429 only as often as asked")

	a.ARMStatus.Store(http.StatusForbidden)
	resp, body = getTLS(t, srv, path, bearer...)
	assert.Equal(t, http.StatusForbidden, resp.StatusCode)
	assert.Contains(t, string(body), "AuthorizationFailed")
	a.ARMStatus.Store(0)

	resp, _ = getTLS(t, srv, cfg.ExtensionResourceID+"?api-version=2022-11-01", bearer...)
	assert.Equal(t, http.StatusBadRequest, resp.StatusCode, "only the pinned api-version")
}

// TestAzureManagedCluster: ARM serves the extension's parent, the managed
// cluster, whose node resource group is the node's IMDS resource group
// unless OtherCluster says the extension is another cluster's.
func TestAzureManagedCluster(t *testing.T) {
	a := newAzure(t)
	srv := httptest.NewTLSServer(a.ARMHandler())
	t.Cleanup(srv.Close)
	imds := httptest.NewServer(a.IMDSHandler())
	t.Cleanup(imds.Close)
	cfg := a.Config()
	clusterID := strings.TrimSuffix(cfg.ExtensionResourceID, "/providers/Microsoft.KubernetesConfiguration/extensions/suse-registration")
	require.NotEqual(t, cfg.ExtensionResourceID, clusterID)
	path := clusterID + "?api-version=" + fakecloud.ManagedClusterAPIVersion
	bearer := []string{"Authorization", "Bearer " + cfg.AccessToken}
	nodeRG := func(body []byte) string {
		var mc struct {
			Type       string `json:"type"`
			Properties struct {
				NodeResourceGroup string `json:"nodeResourceGroup"`
			} `json:"properties"`
		}
		require.NoError(t, json.Unmarshal(body, &mc))
		assert.Equal(t, "Microsoft.ContainerService/ManagedClusters", mc.Type)
		return mc.Properties.NodeResourceGroup
	}

	req, err := http.NewRequest(http.MethodGet, imds.URL+"/metadata/instance/compute?api-version=2021-02-01", nil)
	require.NoError(t, err)
	req.Header.Set("Metadata", "true")
	resp, err := imds.Client().Do(req)
	require.NoError(t, err)
	var comp struct {
		ResourceGroupName string `json:"resourceGroupName"`
	}
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&comp))
	_ = resp.Body.Close()
	assert.Equal(t, "MC_rg-fake_aks-fake_westeurope", comp.ResourceGroupName, "AKS's name for the node resource group")
	assert.Equal(t, comp.ResourceGroupName, cfg.NodeResourceGroup)

	resp, body := getTLS(t, srv, path, bearer...)
	require.Equal(t, http.StatusOK, resp.StatusCode, string(body))
	assert.Equal(t, comp.ResourceGroupName, nodeRG(body), "the cluster the node belongs to")
	assert.Equal(t, int32(1), a.ManagedClusterRequests.Load())

	a.OtherCluster.Store(true)
	_, body = getTLS(t, srv, path, bearer...)
	assert.Equal(t, "MC_rg-fake_aks-other_westeurope", nodeRG(body))
	a.OtherCluster.Store(false)

	a.ManagedClusterStatus.Store(http.StatusForbidden)
	resp, body = getTLS(t, srv, path, bearer...)
	assert.Equal(t, http.StatusForbidden, resp.StatusCode)
	assert.Contains(t, string(body), "Microsoft.ContainerService/managedClusters/read")
	resp, _ = getTLS(t, srv, cfg.ExtensionResourceID+"?api-version="+fakecloud.ExtensionAPIVersion, bearer...)
	assert.Equal(t, http.StatusOK, resp.StatusCode, "the extension can still be read")
	a.ManagedClusterStatus.Store(0)

	resp, _ = getTLS(t, srv, clusterID+"?api-version="+fakecloud.ExtensionAPIVersion, bearer...)
	assert.Equal(t, http.StatusBadRequest, resp.StatusCode, "only the pinned api-version")
	resp, _ = getTLS(t, srv, clusterID+"x?api-version="+fakecloud.ManagedClusterAPIVersion, bearer...)
	assert.Equal(t, http.StatusNotFound, resp.StatusCode, "only the extension's own cluster")
}

// TestAzureIdentityTokenEndpoint: the managed identity token endpoint
// answers like IMDS's: OAuth-shaped errors, the node's one identity only,
// and the faults of the fault table.
func TestAzureIdentityTokenEndpoint(t *testing.T) {
	a := newAzure(t)
	srv := httptest.NewServer(a.IMDSHandler())
	t.Cleanup(srv.Close)
	md := map[string]string{"Metadata": "true"}
	id := a.Config().ManagedIdentityClientID
	q := func(v url.Values) string { return fakecloud.IdentityTokenPath + "?" + v.Encode() }
	good := url.Values{"api-version": {"2018-02-01"}, "resource": {"https://management.azure.com"}, "client_id": {id}}
	without := func(k string) url.Values {
		v := url.Values{}
		for kk, vv := range good {
			if kk != k {
				v[kk] = vv
			}
		}
		return v
	}
	tests := map[string]struct {
		path   string
		header map[string]string
		fault  func()
		status int
		body   string
	}{
		"token for the node's identity": {path: q(good), header: md, status: 200, body: `"access_token":"` + a.Config().AccessToken + `"`},
		"no Metadata header":            {path: q(good), status: 400, body: `{"error":"invalid_request","error_description":"Required metadata header not specified"}`},
		"no api-version":                {path: q(without("api-version")), header: md, status: 400, body: `"invalid_request"`},
		"no resource":                   {path: q(without("resource")), header: md, status: 400, body: "Required audience parameter not specified"},
		"no client_id (system-assigned)": {path: q(without("client_id")), header: md, status: 400,
			body: `{"error":"invalid_request","error_description":"Identity not found"}`},
		"another client_id": {path: q(url.Values{"api-version": {"2018-02-01"}, "resource": {"https://management.azure.com"}, "client_id": {"00000000-0000-0000-0000-000000000000"}}),
			header: md, status: 400, body: "Identity not found"},
		"identity-not-found fault": {path: q(good), header: md, fault: func() { a.IdentityNotFound.Store(true) }, status: 400, body: "Identity not found"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			a.IdentityNotFound.Store(false)
			if tc.fault != nil {
				tc.fault()
			}
			resp, body := get(t, srv.URL+tc.path, tc.header)
			assert.Equal(t, tc.status, resp.StatusCode, string(body))
			assert.Contains(t, string(body), tc.body)
		})
	}

	a.IdentityNotFound.Store(false)
	a.IdentityToken429.Store(1)
	resp, _ := get(t, srv.URL+q(good), md)
	assert.Equal(t, http.StatusTooManyRequests, resp.StatusCode, "first request throttled")
	resp, _ = get(t, srv.URL+q(good), md)
	assert.Equal(t, http.StatusOK, resp.StatusCode, "then a token")
}
