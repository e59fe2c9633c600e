package faults

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/dlock-go/dlock/etcdlock/etcdtest"
)

// etcdEnv is the environment variable that makes a process the etcd
// servers of a run: it holds the servers' config as JSON.
const etcdEnv = "DLOCK_FAULTS_ETCD"

// etcdConfig is what the etcd process is told.
type etcdConfig struct {
	Dir     string
	Members int
	Stalls  string // the file of its stalls
}

// etcdCluster is an etcd cluster run by a process of its own, the worker
// program started with etcdEnv: the run's process keeps only the harness,
// and the members do not share its CPU (nor its race detector). It takes
// one command a line on its stdin and answers each on its stdout.
type etcdCluster struct {
	cmd       *exec.Cmd
	endpoints []string

	mu  sync.Mutex // one command at a time
	in  io.WriteCloser
	out *bufio.Scanner
}

// startEtcd starts the etcd process of cfg's run, with members under dir.
func startEtcd(cfg Config, dir string) (*etcdCluster, error) {
	raw, err := json.Marshal(etcdConfig{Dir: dir, Members: cfg.Members, Stalls: filepath.Join(cfg.Dir, "stall-etcd.jsonl")})
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(cfg.Worker[0], cfg.Worker[1:]...)
	cmd.Env = append(os.Environ(), etcdEnv+"="+string(raw))
	cmd.Stderr = os.Stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	in, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("faults: start etcd: %w", err)
	}
	c := &etcdCluster{cmd: cmd, in: in, out: bufio.NewScanner(stdout)}
	line, err := c.read()
	if err == nil {
		err = json.Unmarshal([]byte(line), &c.endpoints)
	}
	if err != nil {
		c.Close()
		return nil, fmt.Errorf("faults: start etcd: %w", err)
	}
	return c, nil
}

// read reads one answer: "ok ..." or "error ...".
func (c *etcdCluster) read() (string, error) {
	if !c.out.Scan() {
		return "", fmt.Errorf("etcd process ended: %v", c.out.Err())
	}
	line := c.out.Text()
	if msg, ok := strings.CutPrefix(line, "error "); ok {
		return "", errors.New(msg)
	}
	return strings.TrimPrefix(line, "ok "), nil
}

func (c *etcdCluster) do(command string) (string, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, err := fmt.Fprintln(c.in, command); err != nil {
		return "", err
	}
	return c.read()
}

// Size is the number of members.
func (c *etcdCluster) Size() int { return len(c.endpoints) }

// Endpoints returns the client URLs of every member.
func (c *etcdCluster) Endpoints() []string { return c.endpoints }

// Leader returns the index of the member that leads, waiting up to ten
// seconds for an election.
func (c *etcdCluster) Leader() (int, error) {
	s, err := c.do("leader")
	if err != nil {
		return -1, err
	}
	return strconv.Atoi(s)
}

// Stop stops member i, keeping its data.
func (c *etcdCluster) Stop(i int) error {
	_, err := c.do(fmt.Sprintf("stop %d", i))
	return err
}

// Restart starts member i again after Stop.
func (c *etcdCluster) Restart(i int) error {
	_, err := c.do(fmt.Sprintf("restart %d", i))
	return err
}

// Isolate cuts member i off from the other members; its clients still
// reach it.
func (c *etcdCluster) Isolate(i int) error {
	_, err := c.do(fmt.Sprintf("isolate %d", i))
	return err
}

// Partition cuts the link between members i and j; each still reaches
// the others.
func (c *etcdCluster) Partition(i, j int) error {
	_, err := c.do(fmt.Sprintf("partition %d %d", i, j))
	return err
}

// Heal restores the links Isolate and Partition cut.
func (c *etcdCluster) Heal() error {
	_, err := c.do("heal")
	return err
}

// Close kills the process: the members' data is the run's, thrown away
// with it.
func (c *etcdCluster) Close() {
	c.in.Close()
	signalGroup(c.cmd, syscall.SIGKILL)
	c.cmd.Wait()
}

// serveEtcd is the etcd process: it starts the members, prints their
// endpoints as JSON, and runs the commands of its stdin until it ends.
func serveEtcd(raw string) error {
	var cfg etcdConfig
	if err := json.Unmarshal([]byte(raw), &cfg); err != nil {
		return err
	}
	stalls, err := openLogFile(cfg.Stalls, -1)
	if err != nil {
		return err
	}
	defer stalls.f.Close()
	stop := stalls.watchStalls()
	defer stop()
	var opts []etcdtest.Option
	if cfg.Members > 1 {
		opts = append(opts, etcdtest.WithPartitions())
	}
	c, err := etcdtest.New(cfg.Dir, cfg.Members, opts...)
	if err != nil {
		return err
	}
	defer c.Close()
	eps, err := json.Marshal(c.Endpoints())
	if err != nil {
		return err
	}
	fmt.Printf("ok %s\n", eps)
	in := bufio.NewScanner(os.Stdin)
	for in.Scan() {
		verb, arg, _ := strings.Cut(in.Text(), " ")
		a, b, _ := strings.Cut(arg, " ")
		i, _ := strconv.Atoi(a)
		j, _ := strconv.Atoi(b)
		var answer string
		switch {
		case verb == "leader":
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			l, err := c.Leader(ctx)
			cancel()
			answer = result(strconv.Itoa(l), err)
		case (verb == "stop" || verb == "restart") && i >= 0 && i < c.Size():
			if verb == "stop" {
				c.Stop(i)
				answer = result("", nil)
			} else {
				answer = result("", c.Restart(i))
			}
		case verb == "isolate":
			answer = result("", c.Isolate(i))
		case verb == "partition":
			answer = result("", c.Partition(i, j))
		case verb == "heal":
			answer = result("", c.Heal())
		default:
			answer = result("", fmt.Errorf("unknown command %q", in.Text()))
		}
		fmt.Println(answer)
	}
	return in.Err()
}

func result(s string, err error) string {
	if err != nil {
		return "error " + strings.ReplaceAll(err.Error(), "\n", " ")
	}
	return "ok " + s
}
