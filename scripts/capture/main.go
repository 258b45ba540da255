// Command capture records the frames the official Go client
// (github.com/apache/rocketmq-client-go/v2) puts on the wire, to seed the
// remoting fuzz corpus with real client output. It runs the official
// producer against a throw-away in-process server (our remoting server
// answering routes, heartbeats and sends) behind a recording TCP proxy on
// 127.0.0.1, and writes each client->server frame (without its length
// prefix) as a `go test fuzz v1` corpus file.
//
//	go run ./scripts/capture -out remoting/testdata/fuzz/FuzzDecodeFrame
package main

import (
	"context"
	"encoding/binary"
	"flag"
	"fmt"
	"io"
	"log"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"sync"
	"time"

	rocketmq "github.com/apache/rocketmq-client-go/v2"
	"github.com/apache/rocketmq-client-go/v2/primitive"
	"github.com/apache/rocketmq-client-go/v2/producer"
	"github.com/apache/rocketmq-client-go/v2/rlog"

	"github.com/gorocketmq/gorocketmq/message"
	"github.com/gorocketmq/gorocketmq/remoting"
	"github.com/gorocketmq/gorocketmq/remoting/protocol"
)

func main() {
	out := flag.String("out", "remoting/testdata/fuzz/FuzzDecodeFrame", "corpus directory")
	flag.Parse()
	rlog.SetLogLevel("error")
	if err := run(*out); err != nil {
		log.Fatal(err)
	}
}

func run(out string) error {
	proxyLn, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	defer proxyLn.Close()
	proxyAddr := proxyLn.Addr().String()

	srv := remoting.NewServer(remoting.ServerConfig{Addr: "127.0.0.1:0"})
	pool := srv.NewPool("capture", 2, 64)
	ok := func(_ *remoting.Conn, req *remoting.Command) (*remoting.Command, error) {
		return remoting.NewResponse(req, remoting.Success, ""), nil
	}
	srv.Handle(remoting.HeartBeat, pool, ok)
	srv.Handle(remoting.GetRouteInfoByTopic, pool, func(_ *remoting.Conn, req *remoting.Command) (*remoting.Command, error) {
		route := &protocol.TopicRouteData{
			QueueDatas:  []*protocol.QueueData{{BrokerName: "broker-a", ReadQueueNums: 1, WriteQueueNums: 1, Perm: 6}},
			BrokerDatas: []*protocol.BrokerData{{Cluster: "DefaultCluster", BrokerName: "broker-a", BrokerAddrs: map[int64]string{0: proxyAddr}}},
		}
		body, err := route.Encode()
		if err != nil {
			return nil, err
		}
		resp := remoting.NewResponse(req, remoting.Success, "")
		resp.Body = body
		return resp, nil
	})
	send := func(_ *remoting.Conn, req *remoting.Command) (*remoting.Command, error) {
		resp := remoting.NewResponse(req, remoting.Success, "")
		h := protocol.SendMessageResponseHeader{MsgID: message.CreateOffsetMsgID(netip.MustParseAddrPort(proxyAddr), 0), QueueOffset: 0}
		resp.ExtFields = protocol.EncodeHeader(&h, nil)
		return resp, nil
	}
	srv.Handle(remoting.SendMessage, pool, send)
	srv.Handle(remoting.SendBatchMessage, pool, send)
	if err := srv.Start(); err != nil {
		return err
	}
	defer srv.Shutdown(context.Background())

	var (
		mu     sync.Mutex
		frames [][]byte
	)
	go func() {
		for {
			c, err := proxyLn.Accept()
			if err != nil {
				return
			}
			go proxy(c, srv.Addr(), func(f []byte) {
				mu.Lock()
				frames = append(frames, f)
				mu.Unlock()
			})
		}
	}()

	p, err := rocketmq.NewProducer(producer.WithNameServer([]string{proxyAddr}), producer.WithRetry(0))
	if err != nil {
		return err
	}
	if err := p.Start(); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	msg := primitive.NewMessage("TopicTest", []byte("hello"))
	msg.WithTag("tagA")
	msg.WithKeys([]string{"k1"})
	if _, err := p.SendSync(ctx, msg); err != nil {
		return fmt.Errorf("send: %w", err)
	}
	if _, err := p.SendSync(ctx, primitive.NewMessage("TopicTest", []byte("a")), primitive.NewMessage("TopicTest", []byte("bb"))); err != nil {
		return fmt.Errorf("batch: %w", err)
	}
	time.Sleep(1500 * time.Millisecond) // the client heartbeats a second after start
	_ = p.Shutdown()

	mu.Lock()
	defer mu.Unlock()
	if err := os.MkdirAll(out, 0o755); err != nil {
		return err
	}
	seen := map[int32]bool{}
	for _, f := range frames {
		cmd, err := remoting.DecodeFrame(f)
		if err != nil || seen[cmd.Code] {
			continue
		}
		seen[cmd.Code] = true
		name := filepath.Join(out, fmt.Sprintf("official-go-client-code-%d", cmd.Code))
		if err := os.WriteFile(name, []byte(fmt.Sprintf("go test fuzz v1\n[]byte(%q)\n", f)), 0o644); err != nil {
			return err
		}
		fmt.Println("wrote", name)
	}
	return nil
}

// proxy copies both ways and reports every whole client->server frame.
func proxy(c net.Conn, to string, record func([]byte)) {
	defer c.Close()
	s, err := net.Dial("tcp", to)
	if err != nil {
		return
	}
	defer s.Close()
	go func() { _, _ = io.Copy(c, s) }()
	for {
		var prefix [4]byte
		if _, err := io.ReadFull(c, prefix[:]); err != nil {
			return
		}
		n := binary.BigEndian.Uint32(prefix[:])
		if n > remoting.MaxFrameSize {
			return
		}
		frame := make([]byte, n)
		if _, err := io.ReadFull(c, frame); err != nil {
			return
		}
		record(frame)
		if _, err := s.Write(append(prefix[:], frame...)); err != nil {
			return
		}
	}
}
