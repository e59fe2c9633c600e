package faults

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/anishathalye/porcupine"
)

// ArtifactsEnv names the directory under which a failing run of the tests
// or of faultcheck leaves its artifacts (the system's temporary directory
// when it is not set).
const ArtifactsEnv = "DLOCK_FAULTS_ARTIFACTS"

// ArtifactsDir is where a failing run leaves its artifacts: the directory
// ArtifactsEnv names, or the system's temporary directory.
func ArtifactsDir() string {
	if d := os.Getenv(ArtifactsEnv); d != "" {
		return d
	}
	return os.TempDir()
}

// WriteArtifacts leaves what a failing run has for whoever looks into it
// in a new directory under parent, and returns that directory:
//
//   - report.txt: the report (the seed, the schedule, each violation with
//     the history around it);
//   - schedule.json: the configuration, with the seed, and the faults as
//     they ran;
//   - history/: the whole history, each worker's events, the stalls, and
//     the store's writes (writes.jsonl);
//   - linearizability.html: porcupine's visualisation of the operations,
//     of the longest orders its search found (for a key whose history is
//     not linearizable, where it stopped), and of the faults.
func (r *Report) WriteArtifacts(parent string) (string, error) {
	if err := os.MkdirAll(parent, 0o755); err != nil {
		return "", err
	}
	dir, err := os.MkdirTemp(parent, fmt.Sprintf("dlock-faults-%s-%s-%d-", r.Config.Backend, r.Config.Primitive, r.Config.Seed))
	if err != nil {
		return "", err
	}
	if err := os.WriteFile(filepath.Join(dir, "report.txt"), []byte(r.String()), 0o644); err != nil {
		return "", err
	}
	cfg := r.Config
	cfg.Worker = nil
	sched, err := json.MarshalIndent(struct {
		Config   Config
		Schedule []fault
	}{cfg, r.Schedule}, "", "  ")
	if err != nil {
		return "", err
	}
	if err := os.WriteFile(filepath.Join(dir, "schedule.json"), sched, 0o644); err != nil {
		return "", err
	}
	if err := r.writeHistory(filepath.Join(dir, "history")); err != nil {
		return "", err
	}
	if r.lin.model.Init != nil {
		r.lin.info.AddAnnotations(r.faultAnnotations())
		if err := porcupine.VisualizePath(r.lin.model, r.lin.info, filepath.Join(dir, "linearizability.html")); err != nil {
			return "", err
		}
	}
	return dir, nil
}

// writeHistory copies the run's history files into dir, with the store's
// writes.
func (r *Report) writeHistory(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	if r.Config.Dir != "" {
		for _, pattern := range []string{"worker-*.jsonl", "stall-*.jsonl"} {
			files, err := filepath.Glob(filepath.Join(r.Config.Dir, pattern))
			if err != nil {
				return err
			}
			for _, name := range files {
				b, err := os.ReadFile(name)
				if err != nil {
					return err
				}
				if err := os.WriteFile(filepath.Join(dir, filepath.Base(name)), b, 0o644); err != nil {
					return err
				}
			}
		}
	}
	f, err := os.Create(filepath.Join(dir, "writes.jsonl"))
	if err != nil {
		return err
	}
	enc := json.NewEncoder(f)
	for _, w := range r.writes {
		if err := enc.Encode(w); err != nil {
			f.Close()
			return err
		}
	}
	return f.Close()
}

// faultAnnotations shows the schedule's faults in the visualisation.
func (r *Report) faultAnnotations() []porcupine.Annotation {
	var as []porcupine.Annotation
	for _, f := range r.Schedule {
		as = append(as, porcupine.Annotation{
			Tag:             "faults",
			Start:           f.At,
			End:             f.End,
			Description:     f.Kind,
			Details:         fmt.Sprintf("%s on %s for %v", f.Kind, f.Target, time.Duration(f.End-f.At).Round(time.Millisecond)),
			BackgroundColor: "#fde2c8",
		})
	}
	return as
}
