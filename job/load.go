package job

import (
	"errors"
	"flag"
	"fmt"
	"io"

	"github.com/rancher/registration-engine/internal/failure"
	"github.com/rancher/registration-engine/job/regionconfig"
)

// ErrUsage marks a command line the engine cannot parse: a flag it does not
// know (--foo), a flag's value that does not parse, an argument where none
// belongs. Permanent (exit 2, like every configuration problem), and
// reported as one line for the person who typed it, never as a run's
// summary: nothing ran.
var ErrUsage = errors.New("usage")

// LoadConfig fills a Config from args (flags win), then getenv, then the
// defaults, validates it, and reads the region servers' file
// (REGIONSRV_CONFIG). Every problem, the file's included, is reported at once
// in one permanent error before anything is contacted; a bad value names the
// flag or variable and what it got.
func LoadConfig(args []string, getenv func(string) string) (*Config, error) {
	c := &Config{}
	fs := flag.NewFlagSet("registration-engine", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	values := make(map[string]*string, len(settings))
	for _, s := range settings {
		if s.flag == "" {
			continue
		}
		v := new(string)
		values[s.flag] = v
		if s.boolean {
			fs.Func(s.flag, s.help, func(x string) error { *v = x; return nil })
			boolFlag(fs, s.flag)
		} else {
			fs.StringVar(v, s.flag, "", s.help)
		}
	}
	fs.BoolVar(&c.ShowHelp, "help", false, "show this help")
	fs.BoolVar(&c.ShowVersion, "version", false, "print the version")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			c.ShowHelp = true
			return c, nil
		}
		return nil, failure.Permanent(fmt.Errorf("%w: %w; registration-engine --help lists the flags", ErrUsage, err))
	}
	if fs.NArg() > 0 {
		return nil, failure.Permanent(fmt.Errorf("%w: unexpected argument %q; registration-engine --help lists the flags and commands", ErrUsage, fs.Arg(0)))
	}
	if c.ShowHelp || c.ShowVersion {
		return c, nil
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	c.given, c.rejected = map[string]bool{}, map[string]bool{}

	var problems []error
	for _, s := range settings {
		if s.flag == "" {
			continue
		}
		val, from := s.def, "default"
		if set[s.flag] {
			val, from = *values[s.flag], "--"+s.flag
		} else {
			for _, e := range s.envs {
				if v := getenv(e); v != "" {
					val, from = v, e
					break
				}
			}
		}
		if val == "" && s.def == "" {
			continue
		}
		c.given[s.flag] = from != "default"
		var problem error
		if isPlaceholder(val) {
			problem = placeholderProblem(s.flag, from)
		} else if err := s.set(c, val); err != nil {
			shown := val
			if s.secret {
				shown = Secret(val).String()
			}
			problem = fmt.Errorf("%s=%q: %w", from, shown, err)
		}
		if problem != nil {
			problems = append(problems, problem)
			c.rejected[s.flag] = true
			if s.def != "" {
				_ = s.set(c, s.def) // so Validate does not report the same setting twice
			}
		}
	}
	if err := c.Validate(); err != nil {
		problems = append(problems, err)
	}
	// net/http reads the proxy variables itself; one it cannot parse it
	// drops without a word, so they are checked here.
	problems = append(problems, proxyEnvProblems(getenv)...)
	// The region servers' file is configuration too: a broken one must stop
	// the run here, with the other problems, not after phase 2 has called
	// IMDS, Entra and ARM.
	if region, err := regionconfig.Load(c.RegionConfigPath); err != nil {
		problems = append(problems, fmt.Errorf("REGIONSRV_CONFIG: %w", err))
	} else {
		c.RegionSettings = region
	}
	if len(problems) > 0 {
		return nil, failure.Permanent(fmt.Errorf("config: %w", errors.Join(problems...)))
	}
	return c, nil
}

// boolFlag lets `--dry-run` stand alone like a flag.Bool.
func boolFlag(fs *flag.FlagSet, name string) {
	f := fs.Lookup(name)
	f.Value = boolValue{f.Value}
}

type boolValue struct{ flag.Value }

func (boolValue) IsBoolFlag() bool { return true }
