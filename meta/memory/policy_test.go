package memory_test

import (
	"testing"

	"github.com/warrenmq/broker/meta/metatest"
)

func TestPolicies(t *testing.T) { metatest.RunPolicies(t, open(t), nil) }
