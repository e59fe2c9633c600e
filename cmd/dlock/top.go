package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"slices"
	"strconv"
	"strings"
	"time"

	tea "charm.land/bubbletea/v2"
	"github.com/charmbracelet/x/ansi"
	"github.com/dlock-go/dlock"
	"golang.org/x/term"
)

const topHelp = `
Shows the held locks, semaphores and read-write locks whose key matches
PATTERN (default all), refreshed every second (--interval) from the same
reads as dlock ls, with its columns and one more: AGE, how long dlock top
has seen the hold. A hold already there when it started shows ">="
before its age. Keys: a, w, k sort by age (oldest first), waiters (most
first) or key, s switches to the next order, q or Ctrl-C quits.

--once prints one table, without the age, and exits: for scripts and for
output that is not a terminal. Without --once, standard output must be a
terminal. See dlock help ls for the columns.`

// topSorts are the orders of dlock top's rows.
var topSorts = []string{"age", "waiters", "key"}

func cmdTop(e *env, args []string) int {
	var (
		backend  backendFlags
		once     bool
		sortBy   string
		interval time.Duration
	)
	fs := flagSet(e, "top")
	backend.register(fs)
	fs.BoolVar(&once, "once", false, "print one table and exit")
	fs.StringVar(&sortBy, "sort", "age", "order of the rows: `age`, waiters or key")
	fs.DurationVar(&interval, "interval", time.Second, "time between two refreshes")
	pos, stop, code := parseFlags(e, fs, "top", args)
	if stop {
		return code
	}
	pattern, stop, code := patternArg(e, "top", pos)
	if stop {
		return code
	}
	if !slices.Contains(topSorts, sortBy) {
		return usageError(e, "top", "--sort %s: want age, waiters or key", sortBy)
	}
	if interval < 100*time.Millisecond {
		return usageError(e, "top", "--interval %v: must be at least 100ms", interval)
	}
	out, tty := e.stdout.(*os.File)
	tty = tty && isTerminal(out) && e.stdin != nil && isTerminal(e.stdin)
	if !once && !tty {
		return usageError(e, "top", "standard input and output are not a terminal: use --once for one table")
	}
	be, code := backend.connect(e, "top", []need{inspection("top")})
	if be == nil {
		return code
	}
	defer be.close()
	ctx, stopSignals := signalContext(e)
	defer stopSignals()

	m := newTopModel(be.name(), backend.prefix, pattern, sortBy, interval, func(ctx context.Context) ([]dlock.Info, error) {
		ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		return listAll(ctx, be, pattern)
	})
	if once {
		infos, err := listAll(ctx, be, pattern)
		if errors.Is(err, path.ErrBadPattern) {
			return usageError(e, "top", "PATTERN: %v", trimDlock(err))
		}
		if err != nil {
			return backendError(e, ctx, err)
		}
		m.sample(infos, time.Now())
		m.width = 80
		if tty {
			m.width = max(80, terminalWidth(out))
		}
		io.WriteString(e.stdout, m.table(false))
		return exitOK
	}
	m.ctx = ctx
	p := tea.NewProgram(m, tea.WithContext(ctx), tea.WithInput(e.stdin), tea.WithOutput(e.stdout),
		tea.WithoutSignalHandler())
	final, err := p.Run()
	var sig *signalError
	switch {
	case errors.As(context.Cause(ctx), &sig):
		return sig.code()
	case err != nil && !errors.Is(err, tea.ErrProgramKilled):
		fmt.Fprintf(e.stderr, "dlock top: %v\n", err)
		return exitFailure
	}
	if fm, ok := final.(*topModel); ok && fm.err != nil {
		fmt.Fprintf(e.stderr, "dlock: %s\n", trimDlock(fm.err)) // the last refresh failed
	}
	return exitOK
}

// topModel is dlock top's view: the held locks of the last refresh and
// when each was first seen.
type topModel struct {
	ctx      context.Context // nil: Background
	list     func(context.Context) ([]dlock.Info, error)
	store    string
	prefix   string
	pattern  string
	sortBy   string
	interval time.Duration

	rows    []dlock.Info
	seen    map[string]time.Time // by hold (key, owner, fence): when first seen
	before  map[string]bool      // the holds seen in the first refresh, held for an unknown time before
	first   bool                 // the first refresh happened
	updated time.Time
	err     error // of the last refresh
	width   int
}

func newTopModel(store, prefix, pattern, sortBy string, interval time.Duration, list func(context.Context) ([]dlock.Info, error)) *topModel {
	return &topModel{list: list, store: store, prefix: prefix, pattern: pattern, sortBy: sortBy, interval: interval,
		seen: map[string]time.Time{}, before: map[string]bool{}, width: 80}
}

// listed is the result of one refresh.
type listed struct {
	infos []dlock.Info
	err   error
	at    time.Time
}

// refreshMsg asks for the next refresh.
type refreshMsg struct{}

func (m *topModel) fetch() tea.Msg {
	ctx := m.ctx
	if ctx == nil {
		ctx = context.Background()
	}
	infos, err := m.list(ctx)
	return listed{infos, err, time.Now()}
}

func (m *topModel) Init() tea.Cmd { return m.fetch }

func (m *topModel) Update(msg tea.Msg) (tea.Model, tea.Cmd) {
	switch msg := msg.(type) {
	case tea.KeyPressMsg:
		switch msg.String() {
		case "q", "ctrl+c", "esc":
			return m, tea.Quit
		case "a":
			m.sortBy = "age"
		case "w":
			m.sortBy = "waiters"
		case "k":
			m.sortBy = "key"
		case "s":
			m.sortBy = topSorts[(slices.Index(topSorts, m.sortBy)+1)%len(topSorts)]
		}
	case tea.WindowSizeMsg:
		m.width = max(msg.Width, 40)
	case listed:
		if msg.err != nil {
			m.err = msg.err
		} else {
			m.err = nil
			m.sample(msg.infos, msg.at)
		}
		return m, tea.Tick(m.interval, func(time.Time) tea.Msg { return refreshMsg{} })
	case refreshMsg:
		return m, m.fetch
	}
	return m, nil
}

// holdID names one hold of a lock across refreshes.
func holdID(i dlock.Info) string {
	return i.Key + "\x00" + i.Kind.String() + "\x00" + i.Owner + "\x00" + strconv.FormatUint(i.Fence, 10)
}

// sample records the held locks of one refresh, made at time at.
func (m *topModel) sample(infos []dlock.Info, at time.Time) {
	m.rows = m.rows[:0]
	now := map[string]bool{}
	for _, i := range infos {
		if !i.Held {
			continue
		}
		m.rows = append(m.rows, i)
		id := holdID(i)
		now[id] = true
		if _, ok := m.seen[id]; !ok {
			m.seen[id] = at
			if !m.first {
				m.before[id] = true
			}
		}
	}
	for id := range m.seen { // forget the holds that ended
		if !now[id] {
			delete(m.seen, id)
			delete(m.before, id)
		}
	}
	m.first, m.updated = true, at
}

// sorted returns the rows in the chosen order.
func (m *topModel) sorted() []dlock.Info {
	rows := slices.Clone(m.rows)
	slices.SortStableFunc(rows, func(a, b dlock.Info) int {
		switch m.sortBy {
		case "age":
			if c := m.seen[holdID(a)].Compare(m.seen[holdID(b)]); c != 0 {
				return c
			}
		case "waiters":
			if a.Waiters != b.Waiters {
				return b.Waiters - a.Waiters
			}
		}
		return strings.Compare(a.Key, b.Key)
	})
	return rows
}

var (
	titleStyle  = ansi.Style{}.Bold()
	headerStyle = ansi.Style{}.Reverse(true)
)

// View draws the screen: a title, the table, and the keys.
func (m *topModel) View() tea.View {
	v := tea.NewView(m.screen())
	v.AltScreen = true
	return v
}

func (m *topModel) screen() string {
	var b strings.Builder
	when := "reading..."
	if m.first {
		when = m.updated.Format("15:04:05")
	}
	title := fmt.Sprintf("dlock top  %s  prefix %q  %q  %d held  sort: %s  %s",
		m.store, m.prefix, m.pattern, len(m.rows), m.sortBy, when)
	b.WriteString(titleStyle.Styled(cut(title, m.width)) + "\n")
	if m.err != nil {
		b.WriteString(titleStyle.Styled(cut("refresh failed: "+trimDlock(m.err), m.width)) + "\n")
	}
	b.WriteString("\n" + m.table(true))
	b.WriteString("\n" + cut("q quit  a age  w waiters  k key  s next order", m.width) + "\n")
	return b.String()
}

// table renders the rows in m.width columns, with the age column or not.
func (m *topModel) table(withAge bool) string {
	rows := m.sorted()
	grid := make([][]string, 0, len(rows))
	for _, i := range rows {
		r := cells(i)
		if withAge {
			age := short(m.updated.Sub(m.seen[holdID(i)]))
			if m.before[holdID(i)] {
				age = ">=" + age
			}
			r = append(r, age)
		}
		grid = append(grid, r)
	}
	head := columns
	if withAge {
		head = append(slices.Clip(columns), "AGE")
	}
	// Every column but the key as wide as its widest cell (the owner at
	// most 16); the key takes what is left, at least 12.
	widths := make([]int, len(head))
	for c := range head {
		widths[c] = len(head[c])
		for _, r := range grid {
			widths[c] = max(widths[c], len([]rune(r[c])))
		}
	}
	const owner, holds = 3, 4 // indexes in columns
	widths[owner] = min(widths[owner], 16)
	rest := m.width - (len(head) - 1) // one space between columns
	for c := 1; c < len(head); c++ {
		rest -= widths[c]
	}
	widths[0] = max(min(widths[0], rest), 12)
	line := func(r []string) string {
		parts := make([]string, len(r))
		for c, s := range r {
			s = cut(s, widths[c])
			pad := strings.Repeat(" ", widths[c]-len([]rune(s)))
			if c >= holds { // the numbers: holds, TTL, fence, waiters, age
				parts[c] = pad + s
			} else {
				parts[c] = s + pad
			}
		}
		return strings.TrimRight(strings.Join(parts, " "), " ")
	}
	var b strings.Builder
	h := line(head)
	if withAge {
		h = headerStyle.Styled(h + strings.Repeat(" ", max(0, m.width-len(h))))
	}
	b.WriteString(h + "\n")
	for _, r := range grid {
		b.WriteString(line(r) + "\n")
	}
	if len(grid) == 0 {
		fmt.Fprintf(&b, "(no held locks match %q under prefix %q)\n", m.pattern, m.prefix)
	}
	return b.String()
}

// cut shortens s to n runes, with "…" in the middle of what it cuts.
func cut(s string, n int) string {
	r := []rune(s)
	if len(r) <= n || n < 1 {
		return s
	}
	if n < 5 {
		return string(r[:n])
	}
	head := (n - 1) * 2 / 3
	return string(r[:head]) + "…" + string(r[len(r)-(n-1-head):])
}

// terminalWidth is the width of the terminal f, or 80 when unknown.
func terminalWidth(f *os.File) int {
	w, _, err := term.GetSize(int(f.Fd()))
	if err != nil || w <= 0 {
		return 80
	}
	return w
}
