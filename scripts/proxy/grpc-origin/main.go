// The gRPC origin of scripts/proxy-compare.sh's `grpc` cell: grpc-go's helloworld Greeter
// (the service of google.golang.org/grpc/examples/helloworld) over plaintext HTTP/2 (h2c).
// SayHello answers "Hello <name>" and accepts only the name the script sends ("world"); any
// other is INVALID_ARGUMENT. A plain-HTTP status listener answers "conns calls bad": the
// connections accepted, the calls answered OK and the calls refused, so the script can check
// that every call the load generator counted reached this origin.
//
//	go build -o grpc-origin . && GOMAXPROCS=1 ./grpc-origin -listen 127.0.0.1:19382 -status 127.0.0.1:19383
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"net"
	"net/http"
	"sync/atomic"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	pb "google.golang.org/grpc/examples/helloworld/helloworld"
	"google.golang.org/grpc/status"
)

var conns, calls, bad atomic.Int64

type greeter struct {
	pb.UnimplementedGreeterServer
}

func (greeter) SayHello(_ context.Context, in *pb.HelloRequest) (*pb.HelloReply, error) {
	if in.GetName() != "world" {
		bad.Add(1)
		return nil, status.Errorf(codes.InvalidArgument, "unexpected name %q", in.GetName())
	}
	calls.Add(1)
	return &pb.HelloReply{Message: "Hello " + in.GetName()}, nil
}

// countingListener counts the connections the proxies open to the origin (pool churn).
type countingListener struct{ net.Listener }

func (l countingListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err == nil {
		conns.Add(1)
	}
	return c, err
}

func main() {
	listen := flag.String("listen", "127.0.0.1:19382", "gRPC (h2c) address")
	statusAddr := flag.String("status", "127.0.0.1:19383", `plain HTTP address answering "conns calls bad"`)
	flag.Parse()
	lis, err := net.Listen("tcp", *listen)
	if err != nil {
		log.Fatalf("listen %s: %v", *listen, err)
	}
	st, err := net.Listen("tcp", *statusAddr)
	if err != nil {
		log.Fatalf("listen %s: %v", *statusAddr, err)
	}
	go func() {
		log.Fatal(http.Serve(st, http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			fmt.Fprintf(w, "%d %d %d\n", conns.Load(), calls.Load(), bad.Load())
		})))
	}()
	s := grpc.NewServer()
	pb.RegisterGreeterServer(s, greeter{})
	log.Fatal(s.Serve(countingListener{lis}))
}
