// A Go citizen of the registry interop tests: it registers and discovers as go-zero's core/discov and
// go-micro's etcd registry do, re-implemented from their sources with the etcd 3.4 client Debian ships
// (golang-etcd-server-dev, built in GOPATH mode), since neither framework is packaged here.
//
//	go-zero: zeromicro/go-zero 11f21098ddd95a58f801920fea4f0543d4d01586
//	go-micro: v5.30.0 (307b94aab716ced1f3f6ad8673221dea4ce868e8)
//
// Modes (-mode):
//
//	zero-pub    publish -value (or, with -serve, the address of an HTTP server it starts) under -key
//	            with a lease of -ttl seconds, as core/discov/publisher.go does.
//	zero-sub    subscribe to -key as core/discov/internal/registry.go and subscriber.go do; print
//	            `VALUES a,b` (sorted) on every change: the addresses zrpc's resolver would dial.
//	micro-pub   register node `<service>-<uuid>` of -service at -address with -ttl, as
//	            registry/etcd/etcd.go and server/rpc_server.go do; -meta adds node metadata (JSON).
//	micro-sub   on every change of -service, print `MICRO <json>`: the nodes GetService answers and
//	            whether every stored value is byte for byte what json.Marshal writes for it (`exact`).
//
// Each prints `REGISTERED <key>` or `READY` once set up, and runs until killed.
package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"path"
	"sort"
	"strings"
	"sync"
	"time"

	"go.etcd.io/etcd/clientv3"
)

var (
	endpoint = flag.String("etcd", "", "etcd endpoint")
	mode     = flag.String("mode", "", "zero-pub | zero-sub | micro-pub | micro-sub")
	key      = flag.String("key", "", "go-zero Key")
	value    = flag.String("value", "", "go-zero value (host:port)")
	serve    = flag.Bool("serve", false, "serve HTTP and publish its address")
	service  = flag.String("service", "", "go-micro service")
	address  = flag.String("address", "", "go-micro node address")
	version  = flag.String("version", "", "go-micro service version")
	meta     = flag.String("meta", "{}", "go-micro extra node metadata, JSON")
	ttl      = flag.Int64("ttl", 10, "lease TTL, seconds (go-zero: core/discov/clients.go:15)")
)

var out sync.Mutex

func say(format string, args ...interface{}) {
	out.Lock()
	defer out.Unlock()
	fmt.Printf(format+"\n", args...)
}

func main() {
	flag.Parse()
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{*endpoint}, DialTimeout: 5 * time.Second})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	switch *mode {
	case "zero-pub":
		v := *value
		if *serve {
			v = startHTTP()
		}
		zeroPublish(cli, *key, v)
	case "zero-sub":
		zeroSubscribe(cli, *key)
	case "micro-pub":
		microRegister(cli)
	case "micro-sub":
		microSubscribe(cli)
	default:
		fmt.Fprintln(os.Stderr, "unknown -mode")
		os.Exit(2)
	}
	select {}
}

// startHTTP serves `<pid>` on a free loopback port and answers its address.
func startHTTP() string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		panic(err)
	}
	pid := fmt.Sprint(os.Getpid())
	go http.Serve(ln, http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.Write([]byte(pid)) }))
	say("LISTENING %s", ln.Addr().String())
	return ln.Addr().String()
}

// ---- go-zero ----

// zeroPublish: a lease of its own, key `<Key>/<lease id>` (publisher.go:185-200, clients.go:39-41), kept
// alive; its key put again when deleted (publisher.go:128, 150-161); a new lease and key when the
// keep-alive channel closes (publisher.go:132-139, 84-109).
func zeroPublish(cli *clientv3.Client, k, v string) {
	for {
		lease, full, err := zeroRegister(cli, k, v)
		if err != nil {
			time.Sleep(time.Second)
			continue
		}
		say("REGISTERED %s", full)
		ch, err := cli.KeepAlive(context.Background(), lease)
		if err != nil {
			time.Sleep(time.Second)
			continue
		}
		go func() {
			wch := cli.Watch(context.Background(), full, clientv3.WithFilterPut())
			for c := range wch {
				for _, ev := range c.Events {
					if ev.Type == clientv3.EventTypeDelete {
						cli.Put(context.Background(), full, v, clientv3.WithLease(lease))
					}
				}
			}
		}()
		for range ch {
		}
		cli.Revoke(context.Background(), lease)
		time.Sleep(time.Second)
	}
}

func zeroRegister(cli *clientv3.Client, k, v string) (clientv3.LeaseID, string, error) {
	resp, err := cli.Grant(context.Background(), *ttl)
	if err != nil {
		return clientv3.NoLease, "", err
	}
	full := fmt.Sprintf("%s%c%d", k, '/', int64(resp.ID))
	_, err = cli.Put(context.Background(), full, v, clientv3.WithLease(resp.ID))
	return resp.ID, full, err
}

// zeroSubscribe: load `<Key>/` with a prefix get, then watch the prefix from the revision + 1
// (internal/registry.go:301-331, 430-443); a put of an unchanged value is no change, a put of a new value
// replaces the key's old one (registry.go:263-284); values are kept per address, however many keys hold
// one (subscriber.go:140-172, 203-219).
func zeroSubscribe(cli *clientv3.Client, k string) {
	prefix := k + "/"
	values := map[string]string{}
	print := func() {
		set := map[string]bool{}
		for _, v := range values {
			set[v] = true
		}
		list := make([]string, 0, len(set))
		for v := range set {
			list = append(list, v)
		}
		sort.Strings(list)
		say("VALUES %s", strings.Join(list, ","))
	}
	resp, err := cli.Get(context.Background(), prefix, clientv3.WithPrefix())
	if err != nil {
		panic(err)
	}
	for _, kv := range resp.Kvs {
		values[string(kv.Key)] = string(kv.Value)
	}
	say("READY")
	print()
	go func() {
		for w := range cli.Watch(context.Background(), prefix, clientv3.WithPrefix(), clientv3.WithRev(resp.Header.Revision+1)) {
			changed := false
			for _, ev := range w.Events {
				key := string(ev.Kv.Key)
				if ev.Type == clientv3.EventTypePut {
					if old, ok := values[key]; ok && old == string(ev.Kv.Value) {
						continue
					}
					values[key] = string(ev.Kv.Value)
				} else {
					delete(values, key)
				}
				changed = true
			}
			if changed {
				print()
			}
		}
	}()
}

// ---- go-micro ----

// Service, Node, Endpoint and Value have go-micro's fields, tags and order (registry/registry.go:29-54):
// encoding/json writes struct fields in declaration order and map keys sorted.
type Service struct {
	Name      string            `json:"name"`
	Version   string            `json:"version"`
	Metadata  map[string]string `json:"metadata"`
	Endpoints []*Endpoint       `json:"endpoints"`
	Nodes     []*Node           `json:"nodes"`
}

type Node struct {
	Metadata map[string]string `json:"metadata"`
	Id       string            `json:"id"`
	Address  string            `json:"address"`
}

type Endpoint struct {
	Request  *Value            `json:"request"`
	Response *Value            `json:"response"`
	Metadata map[string]string `json:"metadata"`
	Name     string            `json:"name"`
}

type Value struct {
	Name   string   `json:"name"`
	Type   string   `json:"type"`
	Values []*Value `json:"values"`
}

const microPrefix = "/micro/registry/" // registry/etcd/etcd.go:26

func nodePath(s, id string) string { // etcd.go:141-145
	return path.Join(microPrefix, strings.Replace(s, "/", "-", -1), strings.Replace(id, "/", "-", -1))
}

func uuid4() string {
	b := make([]byte, 16)
	rand.Read(b)
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16])
}

// microRegister: node id `<name>-<uuid>` and the five metadata keys of server/rpc_server.go:416-429,
// 670-680; one node per key, under a lease of the register TTL (etcd.go:246-252, 262-274).
func microRegister(cli *clientv3.Client) {
	md := map[string]string{}
	if err := json.Unmarshal([]byte(*meta), &md); err != nil {
		panic(err)
	}
	md["transport"] = "http"
	md["broker"] = "http"
	md["server"] = "mucp"
	md["registry"] = "etcd"
	md["protocol"] = "mucp"
	node := &Node{Id: *service + "-" + uuid4(), Address: *address, Metadata: md}
	s := &Service{Name: *service, Version: *version, Endpoints: make([]*Endpoint, 0), Nodes: []*Node{node}}
	b, _ := json.Marshal(s)
	resp, err := cli.Grant(context.Background(), *ttl)
	if err != nil {
		panic(err)
	}
	k := nodePath(s.Name, node.Id)
	if _, err := cli.Put(context.Background(), k, string(b), clientv3.WithLease(resp.ID)); err != nil {
		panic(err)
	}
	ch, err := cli.KeepAlive(context.Background(), resp.ID)
	if err != nil {
		panic(err)
	}
	go func() {
		for range ch {
		}
	}()
	say("REGISTERED %s", k)
}

type seen struct {
	Id       string            `json:"id"`
	Address  string            `json:"address"`
	Version  string            `json:"version"`
	Metadata map[string]string `json:"metadata"`
}

// microSubscribe: GetService's prefix get of `/micro/registry/<service>/` and decode (etcd.go:351-381,
// 135-139), again on every event of a prefix watch (watcher.go:33-40).
func microSubscribe(cli *clientv3.Client) {
	prefix := path.Join(microPrefix, strings.Replace(*service, "/", "-", -1)) + "/"
	report := func() int64 {
		resp, err := cli.Get(context.Background(), prefix, clientv3.WithPrefix())
		if err != nil {
			return 0
		}
		nodes := []seen{}
		exact := true
		for _, kv := range resp.Kvs {
			var s *Service
			json.Unmarshal(kv.Value, &s)
			if s == nil {
				exact = false
				continue
			}
			again, _ := json.Marshal(s)
			if !bytes.Equal(again, kv.Value) {
				exact = false
				fmt.Fprintf(os.Stderr, "stored %s\nGo     %s\n", kv.Value, again)
			}
			for _, n := range s.Nodes {
				nodes = append(nodes, seen{n.Id, n.Address, s.Version, n.Metadata})
			}
		}
		sort.Slice(nodes, func(i, j int) bool { return nodes[i].Id < nodes[j].Id })
		b, _ := json.Marshal(map[string]interface{}{"nodes": nodes, "exact": exact})
		say("MICRO %s", b)
		return resp.Header.Revision
	}
	rev := report()
	wch := cli.Watch(context.Background(), prefix, clientv3.WithPrefix(), clientv3.WithRev(rev+1))
	say("READY")
	go func() {
		for range wch {
			report()
		}
	}()
}
