package main

import (
	"strings"
	"testing"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"
)

// countingCore counts the With calls that reach the encoding core.
type countingCore struct {
	zapcore.Core
	withs *int
}

func (c countingCore) With(fields []zapcore.Field) zapcore.Core {
	*c.withs++
	return countingCore{c.Core.With(fields), c.withs}
}

// A logger given key-value pairs encodes them only once it writes a line,
// and the line carries them.
func TestLazyCoreEncodesOnWrite(t *testing.T) {
	obs, logs := observer.New(zapcore.InfoLevel)
	withs := 0
	log := zap.New(lazyCore{countingCore{obs, &withs}})
	quiet := log.With(zap.String("name", "o")).With(zap.String("reconcileID", "1"))
	quiet.Debug("below the level")
	if withs != 0 {
		t.Fatalf("%d With calls reached the core before any line was written, want 0", withs)
	}
	quiet.Info("written")
	if withs == 0 {
		t.Fatal("the line was written without its fields")
	}
	entries := logs.All()
	if len(entries) != 1 {
		t.Fatalf("%d lines, want 1", len(entries))
	}
	var keys []string
	for _, f := range entries[0].Context {
		keys = append(keys, f.Key)
	}
	if got := strings.Join(keys, ","); got != "name,reconcileID" {
		t.Errorf("fields %s, want name,reconcileID", got)
	}
}
