// Command fakecloud serves, on loopback, every peer registration-engine
// talks to: Azure IMDS, Entra, ARM, two region servers and two update
// servers. It writes the files and the environment the engine needs into
// --dir, then a file named "ready", and serves until SIGTERM or SIGINT.
// `make demo` runs it; so does the kind e2e's pod, with --listen (every
// server on the pod's address, one region and one update server, fixed
// ports), --host naming the Service the engine dials and --update-ip the
// pod's own address, which the region server hands out.
//
//	fakecloud --dir DIR [--fault NAME[,NAME…]] [--plan publisher:offer:plan] [--reg-code CODE] [--update-cert-validity 144h]
//	fakecloud --dir DIR --listen 0.0.0.0 --host SERVICE --update-ip POD-IP --imds-port N … [--federated-subject SUB]
//	fakecloud --list-faults
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/rancher/registration-engine/e2e/fakecloud"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Getenv, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "fakecloud:", err)
		stop()
		os.Exit(2)
	}
}

func run(ctx context.Context, args []string, getenv func(string) string, stdout io.Writer) error {
	fs := flag.NewFlagSet("fakecloud", flag.ContinueOnError)
	dir := fs.String("dir", getenv("FAKECLOUD_DIR"), "directory for the engine's files and env (FAKECLOUD_DIR)")
	faults := fs.String("fault", getenv("FAKECLOUD_FAULTS"), "faults to switch on, comma-separated (FAKECLOUD_FAULTS); see --list-faults")
	plan := fs.String("plan", getenv("FAKECLOUD_PLAN"), "Marketplace plan ARM reports, publisher:offer:plan (FAKECLOUD_PLAN)")
	host := fs.String("host", "127.0.0.1", "address of IMDS, Entra and ARM (with --listen: of every server, as the engine dials it)")
	listen := fs.String("listen", "", "bind every server to this address (a pod's 0.0.0.0) and advertise --host; one region and one update server")
	updateIP := fs.String("update-ip", "", "with --listen: the IP the region server hands out for the update server (a pod's own; default --host)")
	subject := fs.String("federated-subject", "", "also accept a ServiceAccount token of this subject (system:serviceaccount:NS:NAME) at Entra")
	names := fs.String("names", "", "more names in the certificate of Entra and ARM, comma-separated, for an engine that reaches them by name through a forward proxy (Go never proxies a loopback address)")
	var ports fakecloud.Ports
	for _, p := range []struct {
		v    *int
		name string
	}{
		{&ports.IMDS, "imds"}, {&ports.Entra, "entra"}, {&ports.ARM, "arm"},
		{&ports.Region, "region"}, {&ports.UpdateHTTPS, "update-https"}, {&ports.UpdateHTTP, "update-http"},
	} {
		fs.IntVar(p.v, p.name+"-port", 0, "fixed port of "+p.name+" (0: any free; region and update only with --listen)")
	}
	name := fs.String("update-server-name", "smt-azure.susecloud.net", "name the region servers hand out")
	regCode := fs.String("reg-code", getenv("FAKECLOUD_REG_CODE"), "the one registration code the update servers' SCC API accepts (FAKECLOUD_REG_CODE; empty: any)")
	certValidity := fs.Duration("update-cert-validity", 0, "how long the update servers' certificates are valid from now (FAKECLOUD_UPDATE_CERT_VALIDITY; 0: a year)")
	if v := getenv("FAKECLOUD_UPDATE_CERT_VALIDITY"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil {
			return fmt.Errorf("FAKECLOUD_UPDATE_CERT_VALIDITY: %w", err)
		}
		*certValidity = d
	}
	list := fs.Bool("list-faults", false, "list the faults and exit")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil
		}
		return err
	}
	if *list {
		tw := tabwriter.NewWriter(stdout, 0, 8, 2, ' ', 0)
		fmt.Fprintln(tw, "make demo FAULT=<name>, one of:")
		for _, f := range fakecloud.Faults {
			fmt.Fprintf(tw, "  %s\t%s\n", f.Name, f.Effect)
		}
		return tw.Flush()
	}
	if *dir == "" {
		return errors.New("--dir is required")
	}
	opts := fakecloud.Options{Dir: *dir, Host: *host, UpdateServerName: *name, Listen: *listen, Ports: ports, FederatedSubject: *subject, RegCode: *regCode, UpdateCertValidity: *certValidity}
	if *updateIP != "" {
		opts.UpdateIPs = []string{*updateIP}
	}
	for _, n := range strings.Split(*names, ",") {
		if n = strings.TrimSpace(n); n != "" {
			opts.Names = append(opts.Names, n)
		}
	}
	if *plan != "" {
		p := strings.Split(*plan, ":")
		if len(p) != 3 {
			return fmt.Errorf("--plan %q: want publisher:offer:plan", *plan)
		}
		opts.Plan = fakecloud.AzurePlan{Publisher: p[0], Product: p[1], Name: p[2]}
	}
	for _, f := range strings.Split(*faults, ",") {
		if f = strings.TrimSpace(f); f != "" {
			opts.Faults = append(opts.Faults, f)
		}
	}
	c, err := fakecloud.Start(opts)
	if err != nil {
		return err
	}
	defer c.Stop()
	for _, kv := range c.Environ() {
		fmt.Fprintln(stdout, kv)
	}
	if err := os.WriteFile(filepath.Join(*dir, "ready"), nil, 0o644); err != nil {
		return err
	}
	<-ctx.Done()
	return nil
}
