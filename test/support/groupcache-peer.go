// groupcache-peer is a golang/groupcache node for bulwark's interop tests (test/support/groupcache.ts
// builds it with GO111MODULE=off GOPATH=/usr/share/gocode go build). It listens on 127.0.0.1:0, prints
// "LISTENING <url>", reads its peer list (comma-separated, itself included) as one line on stdin, sets
// it, and prints "READY". Its group "items" loads a key with GET <origin>?key=<key>; 200 is the value,
// anything else an error. GET /get?key=<key> answers the group's value (502 on an error), GET /owner?key=
// the key's owner on Go's ring, GET /stats the group's counters.
package main

import (
	"bufio"
	"context"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"strings"

	"github.com/golang/groupcache"
	"github.com/golang/groupcache/consistenthash"
)

func main() {
	origin := flag.String("origin", "", "origin URL")
	flag.Parse()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	self := "http://" + ln.Addr().String()
	pool := groupcache.NewHTTPPoolOpts(self, nil)
	items := groupcache.NewGroup("items", 64<<20, groupcache.GetterFunc(func(ctx context.Context, key string, dest groupcache.Sink) error {
		res, err := http.Get(*origin + "?key=" + url.QueryEscape(key))
		if err != nil {
			return err
		}
		defer res.Body.Close()
		body, err := io.ReadAll(res.Body)
		if err != nil {
			return err
		}
		if res.StatusCode != http.StatusOK {
			return fmt.Errorf("origin answered %d", res.StatusCode)
		}
		return dest.SetBytes(body)
	}))
	mux := http.NewServeMux()
	mux.Handle("/_groupcache/", pool)
	mux.HandleFunc("/get", func(w http.ResponseWriter, r *http.Request) {
		var value []byte
		if err := items.Get(r.Context(), r.URL.Query().Get("key"), groupcache.AllocatingByteSliceSink(&value)); err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		w.Write(value)
	})
	// GET /owner?key=<key> names the key's owner on a ring built as HTTPPool.Set builds its own.
	var ring *consistenthash.Map
	mux.HandleFunc("/owner", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, ring.Get(r.URL.Query().Get("key")))
	})
	mux.HandleFunc("/stats", func(w http.ResponseWriter, r *http.Request) {
		s := &items.Stats
		fmt.Fprintf(w, `{"gets":%d,"peerLoads":%d,"peerErrors":%d,"localLoads":%d,"serverRequests":%d}`,
			s.Gets.Get(), s.PeerLoads.Get(), s.PeerErrors.Get(), s.LocalLoads.Get(), s.ServerRequests.Get())
	})
	go http.Serve(ln, mux)
	fmt.Println("LISTENING", self)
	line, err := bufio.NewReader(os.Stdin).ReadString('\n')
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	peers := strings.Split(strings.TrimSpace(line), ",")
	ring = consistenthash.New(50, nil)
	ring.Add(peers...)
	pool.Set(peers...)
	fmt.Println("READY")
	// Run until stdin closes or the process is killed.
	io.Copy(io.Discard, os.Stdin)
}
