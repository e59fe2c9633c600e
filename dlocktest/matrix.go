package dlocktest

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/driver"
)

// The columns of the table of what works where, in order.
const (
	colLock      = "Lock"
	colSemaphore = "Semaphore"
	colRWLock    = "Read-write lock"
	colLockAll   = "LockAll"
	colLapse     = "UnlockAfter"
	colRunOnce   = "RunOnce"
	colElection  = "Election"
	colWatch     = "Watch"
	colInspect   = "Inspect"
)

var columns = []string{colLock, colSemaphore, colRWLock, colLockAll, colLapse, colRunOnce, colElection, colWatch, colInspect}

// UpdateEnv names the environment variable that makes [Matrix.Check]
// rewrite the table instead of comparing it: DLOCK_MATRIX_UPDATE=1.
const UpdateEnv = "DLOCK_MATRIX_UPDATE"

// The lines around the table in a Markdown file.
const (
	matrixBegin = "<!-- matrix:begin -->"
	matrixEnd   = "<!-- matrix:end -->"
)

// Matrix is the table of what works where: for each backend that [Run]
// was given with Harness.Matrix set, which columns (kinds of hold and
// operations on them) passed, failed or were declared absent, and why.
// The zero Matrix is ready; it is safe for concurrent use.
type Matrix struct {
	mu   sync.Mutex
	rows []*matrixRow
}

type matrixRow struct {
	backend string
	cols    map[string]*column
	cells   map[string]string // "kind/cell" → "pass", "FAIL" or "absent"
}

// column is what the cells of one column of a row came to.
type column struct {
	passed, failed int
	absent         string // the reason the driver gave
}

func (m *Matrix) row(backend string) *matrixRow {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, r := range m.rows {
		if r.backend == backend {
			return r
		}
	}
	r := &matrixRow{backend: backend, cols: map[string]*column{}, cells: map[string]string{}}
	m.rows = append(m.rows, r)
	return r
}

// record counts the outcome of cell name for col: failed, or absent for
// reason, or passed.
func (m *Matrix) record(r *matrixRow, col, name string, failed bool, reason string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	c := r.cols[col]
	if c == nil {
		c = &column{}
		r.cols[col] = c
	}
	switch {
	case failed:
		c.failed++
		r.cells[name] = "FAIL"
	case reason != "":
		c.absent = reason
		r.cells[name] = "absent"
	default:
		c.passed++
		r.cells[name] = "pass"
	}
}

// mark is a column's cell in the table.
func (c *column) mark() string {
	switch {
	case c == nil:
		return "?"
	case c.failed > 0:
		return "FAIL"
	case c.absent != "":
		return "—"
	}
	return "✓"
}

// lines renders r: its table row, then a line per column declared absent.
func (r *matrixRow) lines() (row string, reasons []string) {
	marks := make([]string, len(columns))
	for i, name := range columns {
		c := r.cols[name]
		marks[i] = c.mark()
		if c != nil && c.failed == 0 && c.absent != "" {
			reasons = append(reasons, fmt.Sprintf("- %s, %s: %s", r.backend, strings.ToLower(name), c.absent))
		}
	}
	return "| " + r.backend + " | " + strings.Join(marks, " | ") + " |", reasons
}

// grid renders every cell of r, a line per kind of hold.
func (r *matrixRow) grid() string {
	var b strings.Builder
	for _, k := range kinds {
		fmt.Fprintf(&b, "%-7s", k.name)
		for _, c := range cells {
			if v, ok := r.cells[k.name+"/"+c.name]; ok {
				fmt.Fprintf(&b, " %s=%s", c.name, v)
			}
		}
		b.WriteByte('\n')
	}
	return b.String()
}

// Check compares the rows of the backends in m with the table between
// the lines "<!-- matrix:begin -->" and "<!-- matrix:end -->" of the
// Markdown file at path, and fails t where they differ. Rows of other
// backends are left to their own tests. With DLOCK_MATRIX_UPDATE=1 in
// the environment it rewrites the rows of m's backends instead. Call it
// after the Run calls that filled m have returned.
func (m *Matrix) Check(t *testing.T, path string) {
	t.Helper()
	m.mu.Lock()
	defer m.mu.Unlock()
	if t.Failed() {
		t.Log("dlocktest: the matrix failed; the table is not compared")
		return
	}
	if m.partial() && testFlag("test.run") != "" {
		t.Log("dlocktest: -run left columns of the matrix out; the table is not compared")
		return
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("dlocktest: the table of what works where: %v", err)
	}
	text := string(data)
	i, j := strings.Index(text, matrixBegin), strings.Index(text, matrixEnd)
	if i < 0 || j < i {
		t.Fatalf("dlocktest: %s has no %q … %q block", path, matrixBegin, matrixEnd)
	}
	block := strings.TrimSpace(text[i+len(matrixBegin) : j])
	var rows, reasons []string
	for _, line := range strings.Split(block, "\n") {
		switch {
		case strings.HasPrefix(line, "| ") && !strings.HasPrefix(line, "| Backend |"):
			rows = append(rows, line)
		case strings.HasPrefix(line, "- "):
			reasons = append(reasons, line)
		}
	}
	var wantRows, wantReasons []string
	for _, r := range m.rows {
		row, why := r.lines()
		t.Logf("dlocktest: the matrix on %s:\n%s", r.backend, r.grid())
		wantRows = append(wantRows, row)
		wantReasons = append(wantReasons, why...)
		rows = replaceOwn(rows, "| "+r.backend+" |", []string{row})
		reasons = replaceOwn(reasons, "- "+r.backend+", ", why)
	}
	if os.Getenv(UpdateEnv) == "1" {
		header := "| Backend | " + strings.Join(columns, " | ") + " |\n|---" + strings.Repeat("|:-:", len(columns)) + "|\n"
		out := header + strings.Join(rows, "\n") + "\n"
		if len(reasons) > 0 {
			out += "\n" + strings.Join(reasons, "\n") + "\n"
		}
		text = text[:i+len(matrixBegin)] + "\n" + out + text[j:]
		if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	for _, want := range append(wantRows, wantReasons...) {
		if !strings.Contains(block, want+"\n") && !strings.HasSuffix(block, want) {
			t.Errorf("dlocktest: %s lacks the line\n\t%s\n(run `make matrix` to write the table from the suite)", path, want)
		}
	}
	for _, line := range append(rows, reasons...) {
		if !strings.Contains(block, line) {
			t.Errorf("dlocktest: %s has a line the suite does not make:\n\t%s\n(run `make matrix`)", path, line)
		}
	}
}

// replaceOwn replaces the lines of lines that start with prefix by own,
// where the first of them was, or at the end.
func replaceOwn(lines []string, prefix string, own []string) []string {
	at := -1
	out := lines[:0:0]
	for _, l := range lines {
		if strings.HasPrefix(l, prefix) {
			if at < 0 {
				at = len(out)
			}
			continue
		}
		out = append(out, l)
	}
	if at < 0 {
		at = len(out)
	}
	return slices.Insert(out, at, own...)
}

// runMatrix runs every cell of the matrix on every kind of hold, as
// subtests <kind>/<cell>, and counts them in h.Matrix when it is set.
func (s *suite) runMatrix(t *testing.T) {
	base := s.locker(t)
	var row *matrixRow
	if s.h.Matrix != nil {
		row = s.h.Matrix.row(s.h.backend(t))
	}
	for _, k := range kinds {
		kindErr := supports(base, k.feature)
		for _, c := range cells {
			if (c.exclude && k.shared) || (c.only != "" && c.only != k.name) {
				continue
			}
			col, err := c.column, kindErr
			if col == "" {
				col = k.column
			}
			if err != nil {
				col = k.column // the kind is absent, not the operation
			} else {
				err = supports(base, c.feature)
			}
			t.Run(k.name+"/"+c.name, func(t *testing.T) {
				t.Parallel()
				if row != nil {
					t.Cleanup(func() { s.h.Matrix.record(row, col, k.name+"/"+c.name, t.Failed(), reason(err)) })
				}
				if err != nil {
					checkAbsent(t, err)
					return
				}
				c.fn(s, t, k)
			})
		}
	}
}

// supports is driver.Supports, with no feature meaning the plain lock.
func supports(l dlock.Locker, f driver.Feature) error {
	if f == 0 {
		return nil
	}
	return driver.Supports(l, f)
}

// checkAbsent fails t unless err, a feature's absence, matches
// errors.ErrUnsupported and gives a reason.
func checkAbsent(t *testing.T, err error) {
	t.Helper()
	if !errors.Is(err, errors.ErrUnsupported) {
		t.Errorf("a feature declared absent with %v, which does not match errors.ErrUnsupported", err)
	}
	if reason(err) == "" {
		t.Errorf("a feature declared absent without a reason: %v", err)
	}
}

// reason is the reason in an absence, or "" for nil.
func reason(err error) string {
	var u *driver.UnsupportedError
	switch {
	case err == nil:
		return ""
	case errors.As(err, &u):
		return u.Reason
	}
	return err.Error()
}

// partial reports whether a column of a row has no cell that ran.
func (m *Matrix) partial() bool {
	for _, r := range m.rows {
		for _, name := range columns {
			if r.cols[name] == nil {
				return true
			}
		}
	}
	return len(m.rows) == 0
}

// testFlag is the value of the go test flag name, or "".
func testFlag(name string) string {
	if f := flag.Lookup(name); f != nil {
		return f.Value.String()
	}
	return ""
}
