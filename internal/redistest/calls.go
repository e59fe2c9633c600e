package redistest

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/redis/go-redis/v9"
)

// Calls is every call the server of c ran since its statistics were last
// reset (CONFIG RESETSTAT), scripts' inner calls included, except the
// INFO and CONFIG calls that reset and read them.
func Calls(ctx context.Context, c *redis.Client) (int64, error) {
	info, err := c.Info(ctx, "commandstats").Result()
	if err != nil {
		return 0, err
	}
	var n int64
	for _, line := range strings.Split(info, "\n") {
		name, rest, ok := strings.Cut(strings.TrimPrefix(strings.TrimSpace(line), "cmdstat_"), ":calls=")
		if !ok || name == "info" || strings.HasPrefix(name, "config") {
			continue
		}
		end := strings.IndexByte(rest, ',')
		if end < 0 {
			return 0, fmt.Errorf("redistest: commandstats line %q", line)
		}
		v, err := strconv.ParseInt(rest[:end], 10, 64)
		if err != nil {
			return 0, fmt.Errorf("redistest: commandstats line %q: %w", line, err)
		}
		n += v
	}
	return n, nil
}
