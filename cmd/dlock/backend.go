package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net"
	"net/url"
	"strings"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/redislock"
	"github.com/redis/go-redis/v9"
)

const defaultRedisURL = "redis://127.0.0.1:6379/0"

// defaultDialTimeout is go-redis's, used when the URL sets none.
const defaultDialTimeout = 5 * time.Second

// quietLogger drops go-redis's log lines (reconnection attempts and the
// like): dlock reports failures itself, in one line.
type quietLogger struct{}

func (quietLogger) Printf(context.Context, string, ...any) {}

// backendFlags are the flags every command that talks to a lock store
// takes: --redis, --etcd or --postgres, and --prefix.
type backendFlags struct {
	url      string
	etcd     string
	postgres string
	prefix   string
	// etcd's login and TLS files
	etcdUser, etcdCA, etcdCert, etcdKey string
}

func (b *backendFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&b.url, "redis", "", "Redis `URL` (default $DLOCK_REDIS_URL, else "+defaultRedisURL+")")
	fs.StringVar(&b.etcd, "etcd", "", "etcd `ENDPOINTS`, comma-separated, instead of Redis (default $DLOCK_ETCD_ENDPOINTS)")
	fs.StringVar(&b.postgres, "postgres", "", "PostgreSQL `URL` (postgres://USER@HOST:PORT/DATABASE), instead of Redis (default $DLOCK_POSTGRES_URL)")
	fs.StringVar(&b.prefix, "prefix", dlock.DefaultPrefix, "namespace of the lock keys: KEY is stored as PREFIX:lock:KEY (Redis, PostgreSQL), PREFIX/lock/KEY/ (etcd)")
	fs.StringVar(&b.etcdUser, "etcd-user", "", "etcd `USER[:PASSWORD]` (default $DLOCK_ETCD_USER; the password may come from $DLOCK_ETCD_PASSWORD)")
	fs.StringVar(&b.etcdCA, "etcd-cacert", "", "`FILE` of the CAs that sign etcd's certificate (default $DLOCK_ETCD_CACERT)")
	fs.StringVar(&b.etcdCert, "etcd-cert", "", "client certificate `FILE` for etcd (default $DLOCK_ETCD_CERT)")
	fs.StringVar(&b.etcdKey, "etcd-key", "", "client key `FILE` for etcd (default $DLOCK_ETCD_KEY)")
}

// The lock stores dlock can use.
const (
	useRedis    = "Redis"
	useEtcd     = "etcd"
	usePostgres = "PostgreSQL"
)

// store says which lock store the flags and environment choose: --redis,
// --etcd or --postgres, else $DLOCK_REDIS_URL, $DLOCK_ETCD_ENDPOINTS or
// $DLOCK_POSTGRES_URL, else the default Redis URL. Asking for more than
// one is a usage error.
func (b *backendFlags) store(e *env) (string, error) {
	stores := []string{useRedis, useEtcd, usePostgres}
	if s, err := chooseOne(stores, []string{"--redis", "--etcd", "--postgres"}, []string{b.url, b.etcd, b.postgres}, "given: choose one lock store"); s != "" || err != nil {
		return s, err
	}
	vars := []string{"DLOCK_REDIS_URL", "DLOCK_ETCD_ENDPOINTS", "DLOCK_POSTGRES_URL"}
	values := make([]string, len(vars))
	for i, v := range vars {
		values[i] = e.getenv(v)
	}
	if s, err := chooseOne(stores, vars, values, "set: choose one lock store with --redis, --etcd or --postgres"); s != "" || err != nil {
		return s, err
	}
	return useRedis, nil
}

// chooseOne returns the store whose value is set, "" when none is, and an
// error naming them when more than one is.
func chooseOne(stores, names, values []string, both string) (string, error) {
	var set []string
	store := ""
	for i, v := range values {
		if v != "" {
			set, store = append(set, names[i]), stores[i]
		}
	}
	switch len(set) {
	case 0, 1:
		return store, nil
	case 2:
		return "", fmt.Errorf("%s and %s both %s", set[0], set[1], both)
	}
	return "", fmt.Errorf("%s and %s all %s", strings.Join(set[:len(set)-1], ", "), set[len(set)-1], both)
}

// backend is a connected lock store: the Locker that run uses, and the
// views of its locks that status, ls and unlock use.
type backend interface {
	dlock.Locker
	dlock.Inspector
	// name is the store's name in messages: "Redis", "etcd" or
	// "PostgreSQL".
	name() string
	close()
}

// connect opens the lock store, refuses what it cannot honour of needs,
// and checks that it answers within the dial timeout. It prints one line
// and returns an exit code when it cannot: exitUsage for an unmet need,
// before anything is sent to the store.
func (b *backendFlags) connect(e *env, name string, needs []need, opts ...dlock.Option) (backend, int) {
	store, err := b.store(e)
	if err != nil {
		return nil, usageError(e, name, "%v", err)
	}
	var (
		be   backend
		ping func() int
		code int
	)
	switch store {
	case useEtcd:
		be, ping, code = b.openEtcd(e, name, opts...)
	case usePostgres:
		be, ping, code = b.openPostgres(e, name, opts...)
	default:
		be, ping, code = b.openRedis(e, name, opts...)
	}
	if be == nil {
		return nil, code
	}
	if e.wrapBackend != nil {
		be = e.wrapBackend(be)
	}
	if line := unmet(be, needs); line != "" {
		be.close()
		fmt.Fprintf(e.stderr, "dlock: %s\n", line)
		return nil, exitUsage
	}
	if code := ping(); code != 0 {
		be.close()
		return nil, code
	}
	return be, 0
}

// redisBackend is a connected Redis client and the Locker over it.
type redisBackend struct {
	*redislock.Locker
	client redis.UniversalClient
}

func (b *redisBackend) name() string { return useRedis }

func (b *redisBackend) close() {
	b.Locker.Close()
	b.client.Close()
}

// openRedis opens the Redis backend, and returns it with the check that
// Redis answers within the dial timeout.
func (b *backendFlags) openRedis(e *env, name string, opts ...dlock.Option) (backend, func() int, int) {
	raw := b.url
	if raw == "" {
		raw = e.getenv("DLOCK_REDIS_URL")
	}
	if raw == "" {
		raw = defaultRedisURL
	}
	if isRedlockURL(raw) {
		return b.openRedlock(e, name, raw, opts...)
	}
	cfg, err := parseRedisURL(raw, e.getenv("DLOCK_REDIS_PASSWORD"))
	if err != nil {
		return nil, nil, usageError(e, name, "%v", err)
	}
	client := cfg.client()
	locker, err := redislock.New(client, append([]dlock.Option{dlock.WithPrefix(b.prefix)}, opts...)...)
	if err != nil {
		client.Close()
		return nil, nil, usageError(e, name, "%v", trimDlock(err))
	}
	ping := func() int {
		ctx, cancel := context.WithTimeout(context.Background(), cfg.dialTimeout)
		defer cancel()
		if err := client.Ping(ctx).Err(); err != nil {
			if cfg.failover != nil && errors.Is(err, redis.Nil) {
				// A sentinel answered GET-MASTER-ADDR-BY-NAME with nil.
				fmt.Fprintf(e.stderr, "dlock: the sentinels at %s know no master named %q: check master_name in the URL\n",
					strings.Join(cfg.failover.SentinelAddrs, ","), cfg.failover.MasterName)
				return exitConfig
			}
			if ctx.Err() != nil {
				err = fmt.Errorf("no answer within %v", cfg.dialTimeout)
			}
			return refused(e, "Redis", cfg.addrs(), redisRefusal(err), err)
		}
		return 0
	}
	return &redisBackend{Locker: locker, client: client}, ping, 0
}

// redisConfig is the parsed form of a --redis URL: exactly one of the
// three option sets is non-nil.
type redisConfig struct {
	simple      *redis.Options
	failover    *redis.FailoverOptions
	cluster     *redis.ClusterOptions
	dialTimeout time.Duration
}

// parseRedisURL parses the forms of --redis:
//
//	redis://[USER:PASSWORD@]HOST[:PORT][/DB][?OPTIONS]     one server
//	rediss://...                                           one server over TLS
//	unix://[USER:PASSWORD@]/PATH/TO/SOCKET[?db=DB]         one server on a unix socket
//	redis+sentinel://[USER:PASS@]HOST:PORT[/DB]?master_name=NAME[&addr=HOST:PORT...]
//	                                                       Sentinel (user and password are the sentinels')
//	redis+cluster://HOST:PORT[?addr=HOST:PORT...]          Cluster, seeded by one or more nodes
//	redis://HOST:PORT,redis://HOST:PORT,...                Cluster, as a comma list
//
// rediss+sentinel and rediss+cluster add TLS. OPTIONS are go-redis's URL
// options (dial_timeout=2s, read_timeout, max_retries, ...). password is
// used when the URL carries none. Errors never contain the password.
func parseRedisURL(raw, password string) (*redisConfig, error) {
	cfg, err := parseURLForms(raw)
	if err != nil {
		return nil, fmt.Errorf("bad Redis URL %s: %s", redactURL(raw), redactErr(err, raw))
	}
	// Deadlines of contexts bound every command, so that a silent server
	// cannot hold dlock past them.
	var dial *time.Duration
	switch {
	case cfg.simple != nil:
		if cfg.simple.Password == "" {
			cfg.simple.Password = password
		}
		cfg.simple.ContextTimeoutEnabled = true
		dial = &cfg.simple.DialTimeout
	case cfg.failover != nil:
		cfg.failover.ContextTimeoutEnabled = true
		if cfg.failover.MasterName == "" {
			return nil, fmt.Errorf("bad Redis URL %s: a redis+sentinel URL needs ?master_name=NAME", redactURL(raw))
		}
		if cfg.failover.Password == "" {
			cfg.failover.Password = password
		}
		dial = &cfg.failover.DialTimeout
	default:
		cfg.cluster.ContextTimeoutEnabled = true
		if cfg.cluster.Password == "" {
			cfg.cluster.Password = password
		}
		dial = &cfg.cluster.DialTimeout
	}
	if *dial <= 0 {
		*dial = defaultDialTimeout
	}
	cfg.dialTimeout = *dial
	return cfg, nil
}

func parseURLForms(raw string) (*redisConfig, error) {
	if raw == "" {
		return nil, errors.New("empty URL")
	}
	if strings.Contains(raw, ",") {
		parts := strings.Split(raw, ",")
		o, err := redis.ParseClusterURL(parts[0])
		if err != nil {
			return nil, err
		}
		for _, p := range parts[1:] {
			addr, err := hostPort(p)
			if err != nil {
				return nil, err
			}
			o.Addrs = append(o.Addrs, addr)
		}
		return &redisConfig{cluster: o}, nil
	}
	scheme, rest, ok := strings.Cut(raw, "://")
	if !ok {
		return nil, errors.New("missing scheme: want " + schemeList())
	}
	form, ok := schemeForm(scheme)
	if !ok {
		return nil, fmt.Errorf("unknown URL scheme %q: want %s", scheme, schemeList())
	}
	base, _, _ := strings.Cut(scheme, "+")
	switch form {
	case formServer:
		o, err := redis.ParseURL(raw)
		if err != nil {
			return nil, err
		}
		return &redisConfig{simple: o}, nil
	case formSentinel:
		o, err := redis.ParseFailoverURL(base + "://" + rest)
		if err != nil {
			return nil, err
		}
		return &redisConfig{failover: o}, nil
	case formCluster:
		o, err := redis.ParseClusterURL(base + "://" + rest)
		if err != nil {
			return nil, err
		}
		return &redisConfig{cluster: o}, nil
	}
	return nil, fmt.Errorf("a %s:// URL names Redlock's servers, not one store", scheme) // openRedis takes them first
}

// hostPort reads the address of one more Cluster node in a comma list:
// HOST:PORT, or a redis:// or rediss:// URL.
func hostPort(s string) (string, error) {
	if !strings.Contains(s, "://") {
		if _, _, err := net.SplitHostPort(s); err != nil {
			return "", err
		}
		return s, nil
	}
	u, err := url.Parse(s)
	if err != nil {
		return "", err
	}
	if u.Scheme != "redis" && u.Scheme != "rediss" {
		return "", fmt.Errorf("unknown URL scheme %q in a Cluster list", u.Scheme)
	}
	port := u.Port()
	if port == "" {
		port = "6379"
	}
	return net.JoinHostPort(u.Hostname(), port), nil
}

func (c *redisConfig) client() redis.UniversalClient {
	switch {
	case c.simple != nil:
		return redis.NewClient(c.simple)
	case c.failover != nil:
		return redis.NewFailoverClient(c.failover)
	}
	return redis.NewClusterClient(c.cluster)
}

// addrs names the servers of the configuration, for messages.
func (c *redisConfig) addrs() string {
	switch {
	case c.simple != nil:
		return c.simple.Addr
	case c.failover != nil:
		return "sentinel " + strings.Join(c.failover.SentinelAddrs, ",") + " (master " + c.failover.MasterName + ")"
	}
	return "cluster " + strings.Join(c.cluster.Addrs, ",")
}

// redactURL hides the password of a URL's user information, even in a
// URL that does not parse.
func redactURL(raw string) string {
	out := make([]string, 0, 1)
	for _, part := range strings.Split(raw, ",") {
		scheme, rest, ok := strings.Cut(part, "://")
		if !ok {
			out = append(out, part)
			continue
		}
		end := strings.IndexAny(rest, "/?#")
		if end < 0 {
			end = len(rest)
		}
		if at := strings.LastIndex(rest[:end], "@"); at >= 0 {
			user, _, hasPass := strings.Cut(rest[:at], ":")
			if hasPass {
				rest = user + ":xxxxx" + rest[at:]
			}
		}
		out = append(out, scheme+"://"+rest)
	}
	return strings.Join(out, ",")
}

// redactErr returns err's message without the URL (which url.Parse puts
// in its errors).
func redactErr(err error, raw string) string {
	var ue *url.Error
	if errors.As(err, &ue) {
		err = ue.Err
	}
	msg := err.Error()
	for _, part := range strings.Split(raw, ",") {
		msg = strings.ReplaceAll(msg, part, redactURL(part))
	}
	return msg
}

// trimDlock drops the "dlock: " prefix of a library error, for a message
// that already starts with it.
func trimDlock(err error) string { return strings.TrimPrefix(err.Error(), "dlock: ") }

// refusal is how a store turned dlock's first request down.
type refusal int

const (
	noAnswer  refusal = iota // no answer, or the connection failed
	badLogin                 // the store refused the login
	badConfig                // the store refused the configuration: a database that does not exist
	badTLS                   // the TLS handshake failed, on either side
)

// refused reports why the store at where did not take dlock's first
// request, and returns the exit code.
func refused(e *env, store, where string, how refusal, err error) int {
	switch how {
	case badLogin:
		fmt.Fprintf(e.stderr, "dlock: %s at %s refused the login: %v (check the user and password)\n", store, where, err)
		return exitNoPerm
	case badConfig:
		fmt.Fprintf(e.stderr, "dlock: %s at %s refused the configuration: %v\n", store, where, err)
		return exitConfig
	case badTLS:
		fmt.Fprintf(e.stderr, "dlock: the TLS handshake with %s at %s failed: %v\n", store, where, err)
		return exitNoPerm
	}
	fmt.Fprintf(e.stderr, "dlock: cannot reach %s at %s: %v\n", store, where, err)
	return exitUnavailable
}

// redisRefusal classifies the error of a Redis ping: a reply of
// WRONGPASS, NOAUTH, NOPERM (or an older server's ERR about AUTH) refused
// the login, any other reply the configuration.
func redisRefusal(err error) refusal {
	var reply redis.Error
	if !errors.As(err, &reply) {
		return noAnswer
	}
	msg := reply.Error()
	if strings.HasPrefix(msg, "WRONGPASS") || strings.HasPrefix(msg, "NOAUTH") || strings.HasPrefix(msg, "NOPERM") ||
		strings.HasPrefix(msg, "ERR") && (strings.Contains(msg, "AUTH") || strings.Contains(msg, "password")) {
		return badLogin
	}
	return badConfig
}
