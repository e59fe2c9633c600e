package main

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"net"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/redis/rueidis"
)

// The floors are the least a correct single-instance lock can do, SET NX PX
// with a random token and a scripted compare-and-delete, sent three ways:
// one command per round trip on go-redis (floor), through go-redis's
// AutoPipeliner (the commands of concurrent goroutines leave together), and
// through rueidis, which pipelines concurrent commands by default.

// floorSystems are the floors of part 1; the first is the plain one.
func floorSystems() []system { return []system{floor{}, floorAuto{}, floorRueidis{}} }

// floorAuto is the floor sent through go-redis's AutoPipeliner (blocking
// face, default options: one ordered batch stream).
type floorAuto struct{}

func (floorAuto) name() string { return "floor go-redis AutoPipeline" }

func (floorAuto) party(e endpoint, rtt *counter) (party, error) {
	c := newClient(e.redis, rtt)
	ap, err := c.AutoPipeline()
	if err != nil {
		c.Close()
		return nil, err
	}
	return &floorParty{c: ap, closeFn: func() error { return errors.Join(ap.Close(), c.Close()) }, release: redis.NewScript(releaseSrc)}, nil
}

// floorRueidis is the floor on a rueidis client with its defaults
// (auto-pipelining on).
type floorRueidis struct{}

func (floorRueidis) name() string { return "floor rueidis" }

func (floorRueidis) party(e endpoint, rtt *counter) (party, error) {
	c, err := rueidis.NewClient(rueidisOptions(e, rtt))
	if err != nil {
		return nil, err
	}
	return &rueidisFloorParty{c: c, release: rueidis.NewLuaScript(releaseSrc)}, nil
}

// rueidisOptions are the options of a rueidis client of the server of e,
// with its round trips and commands counted on the wire.
func rueidisOptions(e endpoint, rtt *counter) rueidis.ClientOption {
	return rueidis.ClientOption{
		InitAddress:       []string{e.redis.Addr},
		ConnWriteTimeout:  e.redis.WriteTimeout,
		Dialer:            net.Dialer{Timeout: e.redis.DialTimeout},
		DialCtxFn:         countingDialer(rtt),
		ForceSingleClient: true, // it is one server: no cluster probe
	}
}

type rueidisFloorParty struct {
	c       rueidis.Client
	release *rueidis.Lua
}

func (p *rueidisFloorParty) lock(ctx context.Context, key string, ttl time.Duration, wait bool) (held, error) {
	var b [16]byte
	rand.Read(b[:])
	tok := base64.RawURLEncoding.EncodeToString(b[:])
	for {
		err := p.c.Do(ctx, p.c.B().Set().Key(key).Value(tok).Nx().Px(ttl).Build()).Error()
		if err == nil {
			return &rueidisFloorLock{p: p, key: key, tok: tok}, nil
		}
		if !rueidis.IsRedisNil(err) {
			return nil, err
		}
		if !wait {
			return nil, errBusy
		}
		if err := pause(ctx); err != nil {
			return nil, err
		}
	}
}

func (p *rueidisFloorParty) close() error { p.c.Close(); return nil }

type rueidisFloorLock struct {
	p        *rueidisFloorParty
	key, tok string
}

func (l *rueidisFloorLock) unlock(ctx context.Context) error {
	n, err := l.p.release.Exec(ctx, l.p.c, []string{l.key}, []string{l.tok}).AsInt64()
	if err == nil && n != 1 {
		err = errBusy
	}
	return err
}
func (l *rueidisFloorLock) keepAlive(time.Duration) {}
func (l *rueidisFloorLock) lost() bool              { return false }
func (l *rueidisFloorLock) redisKey() string        { return l.key }
func (l *rueidisFloorLock) value() string           { return l.tok }
