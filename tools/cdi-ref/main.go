// cdi-ref: a thin driver around the Debian-packaged reference CDI library
// (github.com/container-orchestrated-devices/container-device-interface,
// v0.5.2), used by podshim's differential test and benchmark. It loads the
// given spec directories exactly as a runtime would, reports every spec
// file's errors and the resolvable devices, and optionally injects devices
// into an OCI config. Output is one JSON object on stdout.
//
// Build (GOPATH mode, no network):
//   GO111MODULE=off GOPATH=<tmp>:/usr/share/gocode go build -o cdi-ref main.go
//
// Usage:
//   cdi-ref -dir D [-dir D]... [-config config.json -devices a,b] [-repeat N]
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"sort"
	"strings"
	"syscall"
	"time"

	"github.com/container-orchestrated-devices/container-device-interface/pkg/cdi"
	oci "github.com/opencontainers/runtime-spec/specs-go"
)

type dirList []string

func (d *dirList) String() string     { return strings.Join(*d, ",") }
func (d *dirList) Set(v string) error { *d = append(*d, v); return nil }

type injectResult struct {
	OK         bool      `json:"ok"`
	Error      string    `json:"error,omitempty"`
	Unresolved []string  `json:"unresolved,omitempty"`
	Config     *oci.Spec `json:"config,omitempty"`
}

type output struct {
	Errors   map[string][]string `json:"errors"`
	Devices  []string            `json:"devices"`
	Inject   *injectResult       `json:"inject,omitempty"`
	LoadNs   []int64             `json:"load_ns,omitempty"`
	InjectNs []int64             `json:"inject_ns,omitempty"`
	MaxRSSKb int64               `json:"maxrss_kb"`
}

func main() {
	var dirs dirList
	flag.Var(&dirs, "dir", "spec directory, in increasing priority (repeatable)")
	config := flag.String("config", "", "OCI config.json to inject into")
	devices := flag.String("devices", "", "comma-separated qualified device names")
	repeat := flag.Int("repeat", 0, "benchmark: load and inject this many times, recording durations")
	flag.Parse()

	out := output{Errors: map[string][]string{}, Devices: []string{}}

	newCache := func() *cdi.Cache {
		// Errors are per file (GetErrors); NewCache's own error only
		// reports option failures.
		c, err := cdi.NewCache(cdi.WithSpecDirs(dirs...), cdi.WithAutoRefresh(false))
		if c == nil {
			fmt.Fprintf(os.Stderr, "cdi-ref: NewCache: %v\n", err)
			os.Exit(2)
		}
		return c
	}

	var base oci.Spec
	var names []string
	if *config != "" {
		data, err := os.ReadFile(*config)
		if err != nil {
			fmt.Fprintf(os.Stderr, "cdi-ref: %v\n", err)
			os.Exit(2)
		}
		if err := json.Unmarshal(data, &base); err != nil {
			fmt.Fprintf(os.Stderr, "cdi-ref: config: %v\n", err)
			os.Exit(2)
		}
		if *devices != "" {
			names = strings.Split(*devices, ",")
		}
	}
	inject := func(c *cdi.Cache) *injectResult {
		var spec oci.Spec
		data, _ := json.Marshal(&base) // a deep copy
		_ = json.Unmarshal(data, &spec)
		res := &injectResult{}
		unresolved, err := c.InjectDevices(&spec, names...)
		if err != nil {
			res.Error = err.Error()
			res.Unresolved = unresolved
		} else {
			res.OK = true
			res.Config = &spec
		}
		return res
	}

	for i := 0; i < *repeat; i++ {
		t0 := time.Now()
		c := newCache()
		t1 := time.Now()
		if *config != "" {
			inject(c)
		}
		t2 := time.Now()
		out.LoadNs = append(out.LoadNs, t1.Sub(t0).Nanoseconds())
		out.InjectNs = append(out.InjectNs, t2.Sub(t1).Nanoseconds())
	}

	c := newCache()
	for path, errs := range c.GetErrors() {
		for _, e := range errs {
			out.Errors[path] = append(out.Errors[path], e.Error())
		}
	}
	out.Devices = append(out.Devices, c.ListDevices()...)
	sort.Strings(out.Devices)
	if *config != "" {
		out.Inject = inject(c)
	}

	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err == nil {
		out.MaxRSSKb = ru.Maxrss
	}
	enc := json.NewEncoder(os.Stdout)
	enc.SetIndent("", "  ")
	if err := enc.Encode(&out); err != nil {
		fmt.Fprintf(os.Stderr, "cdi-ref: %v\n", err)
		os.Exit(2)
	}
}
