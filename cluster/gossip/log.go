package gossip

import (
	"context"
	"log/slog"
	"strings"
)

// logWriter is the io.Writer under memberlist's *log.Logger (created with
// no prefix and no flags). memberlist writes lines such as
//
//	[DEBUG] memberlist: Stream connection from=127.0.0.1:5000
//	[ERR] memberlist: Failed to send ping: ...
//
// logWriter logs each at its level into slog, without the tag and the
// "memberlist: " prefix. Lines without a tag log at Info.
type logWriter struct {
	log *slog.Logger
}

func (w logWriter) Write(p []byte) (int, error) {
	for line := range strings.SplitSeq(strings.TrimRight(string(p), "\n"), "\n") {
		if line == "" {
			continue
		}
		level, msg := parseLogLine(line)
		w.log.Log(context.Background(), level, msg)
	}
	return len(p), nil
}

// parseLogLine splits a memberlist log line into its slog level and its
// message.
func parseLogLine(line string) (slog.Level, string) {
	level := slog.LevelInfo
	rest := line
	if strings.HasPrefix(line, "[") {
		if end := strings.IndexByte(line, ']'); end > 0 {
			switch strings.ToUpper(line[1:end]) {
			case "TRACE", "DEBUG":
				level = slog.LevelDebug
			case "INFO":
				level = slog.LevelInfo
			case "WARN", "WARNING":
				level = slog.LevelWarn
			case "ERR", "ERROR":
				level = slog.LevelError
			default:
				// Not a tag we know: keep the whole line.
				return level, line
			}
			rest = strings.TrimSpace(line[end+1:])
		}
	} else if strings.HasPrefix(strings.ToLower(line), "err:") {
		// memberlist writes a few errors as "Err: ...".
		level = slog.LevelError
		rest = strings.TrimSpace(line[len("err:"):])
	}
	rest = strings.TrimPrefix(rest, "memberlist: ")
	return level, rest
}
