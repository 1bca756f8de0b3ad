package status

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/rancher/registration-engine/job/escape"
	"github.com/rancher/registration-engine/job/kube"
	"github.com/rancher/registration-engine/job/operator"
	"github.com/rancher/registration-engine/job/retry"
)

// WriteJSON writes the report as one JSON document, every string in it
// with its non-printable characters as JSON escapes (escape.JSON): most
// of them quote foreign text.
func (r *Report) WriteJSON(w io.Writer) error {
	return writeJSON(w, r)
}

// writeJSON writes v indented, through escape.JSON.
func writeJSON(w io.Writer, v any) error {
	doc, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	_, err = w.Write(append(escape.JSON(doc), '\n'))
	return err
}

// WriteText writes the verdict line, then the evidence one link per
// paragraph, for a person. Every line, the verdict's included, goes out
// through Printable: most of what they quote is foreign text. A paragraph
// with no lines (no last run, no recovery, nothing unreadable) is left out.
func (r *Report) WriteText(w io.Writer) error {
	var b strings.Builder
	b.WriteString(escape.Printable(r.Verdict.Line) + "\n\n")
	ns := r.Namespace
	for _, p := range []struct {
		label string
		lines []string
	}{
		{"CronJob", r.CronJob.text(ns)},
		{"Jobs", r.Jobs.text()},
		{"Lease", r.Lease.text(ns)},
		{"Last run", lastRunText(r.Lease.LastRun)},
		{"Recovery", r.Lease.recoveryText(ns)},
		{"Secret", r.Secret.text(ns, r.Time)},
		{"DNS", r.DNS.text(r.CronJob.InClusterDNS)},
		{"Operator", r.Operator.text(r.Secret.Access)},
		{"Unreadable", r.Unreadable},
	} {
		for i, l := range p.lines {
			label := ""
			if i == 0 {
				label = p.label
			}
			fmt.Fprintf(&b, "%-11s%s\n", label, escape.Printable(l))
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// text is the CronJob paragraph: its schedule and last times, and whether
// the engine edits the cluster's DNS.
func (cj CronJob) text(ns string) []string {
	if cj.Access != Read {
		return []string{fmt.Sprintf("%s/%s: %s", ns, cj.Name, cj.Access)}
	}
	line := fmt.Sprintf("%s/%s: schedule %q", ns, cj.Name, cj.Schedule)
	if cj.TimeZone != "" {
		line += " " + cj.TimeZone
	}
	if cj.Suspended {
		line += ", suspended"
	}
	line += ", last schedule " + orNever(cj.LastSchedule) + ", last success " + orNever(cj.LastSuccessful)
	dns := "in-cluster DNS on"
	if !cj.InClusterDNS {
		dns = "in-cluster DNS off (IN_CLUSTER_DNS=false)"
	}
	return []string{line, dns}
}

// text is the Jobs paragraph: each run, and the Event on it.
func (js Jobs) text() []string {
	switch {
	case js.Access != Read:
		return []string{string(js.Access)}
	case len(js.Items) == 0:
		return []string{"none"}
	}
	var lines []string
	for _, j := range js.Items {
		l := j.Name
		if j.Manual {
			l += " (manual)"
		}
		l += ": " + j.Outcome
		if j.Finished != nil {
			l += " " + stamp(*j.Finished)
		} else {
			l += ", started " + stamp(j.Created)
		}
		if j.ExitCode != nil {
			l += fmt.Sprintf(", exit code %d", *j.ExitCode)
		}
		if j.Reason != "" {
			l += ", " + j.Reason
		}
		lines = append(lines, l)
		if e := j.Event; e != nil {
			l := fmt.Sprintf("  event %s %s: %s", e.Type, e.Reason, e.Note)
			if e.Reporter == kube.ReportingController && !e.FromJobPod {
				l += fmt.Sprintf(" (reported by %q, not a pod of this Job)", e.Instance)
			}
			lines = append(lines, l)
		}
	}
	return lines
}

// text is the Lease paragraph: who holds it.
func (l Lease) text(ns string) []string {
	switch {
	case l.Access != Read:
		return []string{fmt.Sprintf("%s/%s: %s", ns, l.Name, l.Access)}
	case l.State == LeaseFree:
		return []string{fmt.Sprintf("%s/%s: free", ns, l.Name)}
	}
	line := fmt.Sprintf("%s/%s: %s by %s since %s, until %s", ns, l.Name, l.State, l.Holder, orNever(l.Since), orNever(l.Until))
	if l.HolderGone {
		line += "; the holder's pod is gone"
	}
	return []string{line}
}

// recoveryText is the Recovery paragraph: the last recovery of a Failed
// Registration the Lease records, and how to clear the record; none when
// there is none.
func (l Lease) recoveryText(ns string) []string {
	rec := l.Recovery
	switch {
	case l.RecoveryError != "":
		return []string{"record unreadable: " + l.RecoveryError}
	case rec == nil:
		return nil
	}
	line := fmt.Sprintf("last recovery %s: %s", stamp(rec.Time), rec.Outcome)
	if rec.Registration != "" {
		line += " (Registration " + rec.Registration + ")"
	}
	lines := []string{line, fmt.Sprintf("%d of %d in a row for this code and URL, the last for cause %s", rec.Attempts, operator.MaxRecoveries, rec.Cause)}
	if rec.Message != "" {
		lines = append(lines, fmt.Sprintf("operator said: %q", rec.Message))
	}
	return append(lines, "clear it: "+operator.ClearRecordCommand(ns, l.Name))
}

// lastRunText is the Last run paragraph, from the record the Lease keeps;
// none before the first run.
func lastRunText(run *retry.Record) []string {
	if run == nil {
		return nil
	}
	lines := []string{fmt.Sprintf("last run %s (%s): %s, exit code %d", stamp(run.Time), orNone(run.Job), run.Outcome, run.ExitCode)}
	if run.Error != "" {
		lines = append(lines, fmt.Sprintf("phase %s: %s", run.Phase, run.Error))
	}
	if r := run.Retrying(); r != "" {
		lines = append(lines, r)
	}
	switch {
	case run.ConsecutiveFailures > 0 && run.FailingSince != nil:
		lines = append(lines, fmt.Sprintf("%d failed in a row since %s; last success %s", run.ConsecutiveFailures, stamp(*run.FailingSince), stampPtr(run.LastSuccess)))
	case run.LastSuccess != nil:
		lines = append(lines, "last success "+stamp(*run.LastSuccess))
	}
	return lines
}

// text is the Secret paragraph: when it was written, which keys it holds
// (sizes, never values), the update server's certificate in it and the
// instance data verified offline.
func (s Secret) text(ns string, now time.Time) []string {
	if s.Access != Read {
		return []string{fmt.Sprintf("%s/%s: %s", ns, s.Name, s.Access)}
	}
	lines := []string{fmt.Sprintf("%s/%s: created %s, last written by the engine %s", ns, s.Name, orNever(s.Created), orNever(s.Written))}
	var keys []string
	for _, k := range operator.ValueKeys() {
		switch n := s.Keys[k]; {
		case n == 0:
			keys = append(keys, k+" MISSING")
		case k == operator.KeyRegistrationType:
			keys = append(keys, k+"="+s.RegistrationType)
		case k == operator.KeyRegistrationURL:
			keys = append(keys, k+"="+s.RegistrationURL)
		default:
			keys = append(keys, fmt.Sprintf("%s set (%d bytes)", k, n))
		}
	}
	lines = append(lines, "keys: "+strings.Join(keys, ", "))
	lines = append(lines, s.Certificate.text(now)...)
	return append(lines, s.InstanceData.text()...)
}

// text is the certificate's lines of the Secret paragraph; none without
// one.
func (c *Cert) text(now time.Time) []string {
	switch {
	case c == nil:
		return nil
	case c.Error != "":
		return []string{"certificate: " + c.Error}
	}
	return []string{fmt.Sprintf("certificate: %s, names %s, expires %s (in %s)", c.Subject, strings.Join(c.DNSNames, " "), stamp(c.NotAfter), days(c.NotAfter.Sub(now))),
		"  SHA-1 " + c.SHA1}
}

// text is the instance data's lines of the Secret paragraph: each check of
// the offline verification; none without a document.
func (d *Document) text() []string {
	switch {
	case d == nil:
		return nil
	case d.Error != "":
		return []string{"instanceData: not a document: " + d.Error}
	}
	ok := d.Signature == "OK" && d.Signer == "OK" && d.Chain == "OK" && d.Claims == "OK"
	signer := d.Signer
	if ok {
		signer += " (" + d.Detail + ")"
	}
	line := fmt.Sprintf("instanceData: verified offline: signature %s, signer %s, chain %s, claims %s", d.Signature, signer, d.Chain, d.Claims)
	if d.CreatedOn != "" {
		line += ", created " + d.CreatedOn
	}
	if ok {
		return []string{line}
	}
	return []string{line, "  " + d.Detail}
}

// text is the DNS paragraph: the engine's entry in the cluster's CoreDNS
// and a Service that would shadow it.
func (n DNS) text(inClusterDNS bool) []string {
	var shadow []string
	if sh := n.Shadow; sh != nil {
		if sh.Access == Read {
			shadow = append(shadow, fmt.Sprintf("shadowed: Service %s answers %s, which a pod's resolver asks first", sh.Service, sh.Name))
		} else {
			shadow = append(shadow, fmt.Sprintf("shadowing Service %s not checked: %s", sh.Service, sh.Access))
		}
	}
	var line string
	switch {
	case !inClusterDNS:
		line = "not checked: the engine leaves it alone (IN_CLUSTER_DNS=false)"
	case !n.Checked:
		line = "not checked: no update server named"
	case n.Access == Read:
		line = fmt.Sprintf("%s (%s): %s → %s", n.Object, n.Key, n.Host, strings.Join(n.Addresses, ", "))
		if n.LastRunAddress != "" {
			line += fmt.Sprintf("; last run %s reached %s", n.LastRun, n.LastRunAddress)
		}
	case n.Access == Absent:
		line = fmt.Sprintf("%s: no hosts entry for %s", n.Object, n.Host)
	default:
		line = fmt.Sprintf("%s: %s", n.Host, n.Access)
	}
	return append([]string{line}, shadow...)
}

// text is the Operator paragraph: what rancher/scc-operator made of the
// Secret, its Registration's conditions and its leader Lease. secret is
// whether the Secret itself was read (adoption is judged only then).
func (o Operator) text(secret Access) []string {
	state := o.State
	if state == "" {
		state = "unknown"
	}
	head := "rancher/scc-operator: " + state
	if o.Registration != "" {
		head += ", Registration " + o.Registration
		if o.Access != Read {
			head += " (" + string(o.Access) + ")"
		}
	}
	lines := []string{head}
	switch {
	case !o.Adopted && secret == Read:
		lines = append(lines, "has not adopted the Secret (no scc.cattle.io labels)")
	case o.ProcessedCurrent != nil && *o.ProcessedCurrent:
		lines = append(lines, "processed the Secret's current values (last processed "+orNever(o.LastProcessed)+")")
	case o.ProcessedCurrent != nil:
		lines = append(lines, "has NOT processed the Secret's current values (last processed "+orNever(o.LastProcessed)+")")
	}
	if o.Access == Read {
		var conds []string
		for _, c := range o.Conditions {
			conds = append(conds, c.Type+"="+c.Status)
		}
		lines = append(lines, "current condition "+o.Current+", activated "+fmt.Sprint(o.Activated), "conditions: "+strings.Join(conds, " "))
		if o.Message != "" {
			kind := "needs a person"
			if o.Recoverable {
				kind = "a retry can fix it"
			}
			lines = append(lines, fmt.Sprintf("failure: %q (cause %s: %s)", o.Message, o.Cause, kind))
		}
	}
	if o.APIInstalled != nil && !*o.APIInstalled {
		lines = append(lines, "registrations.scc.cattle.io is not served")
	}
	switch ld := o.Leader; {
	case ld.Access != Read:
		lines = append(lines, "leader Lease "+ld.Name+": "+string(ld.Access))
	case ld.Alive:
		lines = append(lines, fmt.Sprintf("leader Lease %s: held by %s, renewed %s", ld.Name, ld.Holder, orNever(ld.Renewed)))
	default:
		lines = append(lines, fmt.Sprintf("leader Lease %s: no live holder (last renewed %s)", ld.Name, orNever(ld.Renewed)))
	}
	return lines
}

func orNever(t *time.Time) string {
	if t == nil {
		return "never"
	}
	return stamp(*t)
}

func orNone(s string) string {
	if s == "" {
		return "no Job"
	}
	return s
}
