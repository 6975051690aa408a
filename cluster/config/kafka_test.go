package config

import "testing"

// A Kafka setting is read from the file by the field of kafka.Config that
// names it, with nothing in this package (rack: issue 11).
func TestKafkaRack(t *testing.T) {
	env := map[string]string{"RACK": "eu-west-1a"}
	c, err := Parse([]byte("sources: [{name: a, type: kafka, kafka: {brokers: ['h:1'], topic: t, rack: '${env:RACK}'}}]\n"), testOptions(env, nil))
	if err != nil {
		t.Fatal(err)
	}
	if got := c.Sources[0].Kafka.Rack; got != "eu-west-1a" {
		t.Fatalf("rack %q", got)
	}
	if _, errs := parse(t, "sources: [{name: a, type: kafka, kafka: {brokers: ['h:1'], topic: t, rak: x}}]\n"); len(errs) != 1 ||
		errs[0].Error() != `sources[0].kafka.rak: unknown field (did you mean "rack"?)` {
		t.Fatalf("errors %v", errs)
	}
}
