package httplock_test

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/httplock"
	"github.com/dlock-go/dlock/redislock"
	"github.com/redis/go-redis/v9"
)

func ExampleNew() {
	client := redis.NewClient(&redis.Options{Addr: cmp.Or(os.Getenv("REDIS_ADDR"), "127.0.0.1:6379")})
	defer client.Close()
	locker, err := redislock.New(client, dlock.WithFencing(true))
	if err != nil {
		panic(err)
	}
	defer locker.Close()

	lock, err := httplock.New(locker, "order:{orderId}")
	if err != nil {
		panic(err)
	}
	paying := make(chan struct{})
	finish := make(chan struct{})
	pay := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		lk, _ := dlock.LockFrom(r.Context())
		paying <- struct{}{}
		<-finish // the payment provider is slow
		// A real service passes lk.Fence() to its database with the write.
		fmt.Fprintf(w, "paid order %s (fenced: %t)", r.PathValue("orderId"), lk.Fence() > 0)
	})
	mux := http.NewServeMux()
	mux.Handle("POST /orders/{orderId}/pay", lock(pay))
	srv := httptest.NewServer(mux)
	defer srv.Close()

	first := make(chan string)
	go func() { first <- describe(srv.URL + "/orders/42/pay") }()
	<-paying
	fmt.Println(describe(srv.URL + "/orders/42/pay")) // while the first one pays
	close(finish)
	fmt.Println(<-first)
	// Output:
	// 409 Conflict: another request holds the lock on this resource; retry later (lock order:{orderId})
	// 200 OK: paid order 42 (fenced: true)
}

// describe sends an empty POST and describes the answer.
func describe(url string) string {
	req, _ := http.NewRequestWithContext(context.Background(), http.MethodPost, url, nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err.Error()
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.Header.Get("Content-Type") != "application/problem+json" {
		return resp.Status + ": " + string(body)
	}
	var p struct {
		Detail   string `json:"detail"`
		Template string `json:"lockKeyTemplate"`
	}
	json.Unmarshal(body, &p)
	return fmt.Sprintf("%s: %s (lock %s)", resp.Status, p.Detail, p.Template)
}
