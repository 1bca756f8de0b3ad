package azure_test

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/rancher/registration-engine/providers"
	"github.com/rancher/registration-engine/providers/azure"
)

// TestInspectReportCheck: what status shows of a document is each
// verdict's state, the first failing verdict's detail (the signer's name
// when all hold) and the signed createdOn; a document whose claims fail is
// not shown as verified.
func TestInspectReportCheck(t *testing.T) {
	const created = "11/30/26 11:59:00 -0000"
	ok := azure.Verdict{OK: true, Detail: "fine"}
	signer := azure.Verdict{OK: true, Detail: "metadata.azure.com"}
	content := []byte(`{"timeStamp":{"createdOn":"` + created + `"}}`)
	tests := map[string]struct {
		rep  azure.InspectReport
		want providers.DocumentCheck
	}{
		"all verdicts hold": {
			rep:  azure.InspectReport{Content: content, Signature: ok, Signer: signer, Chain: ok, Claims: ok},
			want: providers.DocumentCheck{Signature: "OK", Signer: "OK", Chain: "OK", Claims: "OK", Detail: "metadata.azure.com", CreatedOn: created},
		},
		"claims fail": {
			rep: azure.InspectReport{Content: content, Signature: ok, Signer: signer, Chain: ok,
				Claims: azure.Verdict{Detail: "signed content has no subscriptionId (api-version 2021-02-01 always signs it)"}},
			want: providers.DocumentCheck{Signature: "OK", Signer: "OK", Chain: "OK", Claims: "FAILED",
				Detail: "signed content has no subscriptionId (api-version 2021-02-01 always signs it)", CreatedOn: created},
		},
		"chain unavailable offline, the first failing verdict's detail": {
			rep: azure.InspectReport{Content: []byte("not json"), Signature: ok, Signer: signer,
				Chain: azure.Verdict{Unavailable: true, Detail: "intermediate not at hand offline"}, Claims: azure.Verdict{Detail: "later"}},
			want: providers.DocumentCheck{Signature: "OK", Signer: "OK", Chain: "UNAVAILABLE", Claims: "FAILED", Detail: "intermediate not at hand offline"},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			assert.Equal(t, tc.want, tc.rep.Check())
		})
	}
}
