package job

import "github.com/rancher/registration-engine/job/remedy"

// remedies are the commands for the release this configuration names.
func (c *Config) remedies() remedy.Remedies {
	return remedy.Remedies{Manager: c.ReleaseManager, Release: c.ReleaseName, Namespace: c.SecretNamespace, ExtensionID: c.Azure.ExtensionResourceID}
}
