package jobs_test

import "github.com/ultimat3/jobs/engine"

func engineRetry(id string) engine.RetryRequest {
	return engine.RetryRequest{RunID: id, By: "test", Reason: "fixed deploy"}
}
