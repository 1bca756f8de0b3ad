// A stand-in for monis.app/mlog, the logging library of Azure Workload
// Identity's webhook, which the Go module proxy does not serve (403 for
// every version). e2e/scripts/azwi-webhook.sh builds the webhook with this
// directory in its place (go mod edit -replace); nothing else uses it.
module monis.app/mlog

go 1.24

require github.com/go-logr/logr v1.4.3
