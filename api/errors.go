package api

import (
	"net/http"
	"strconv"
	"time"

	"github.com/ultimat3/jobs"
)

// statusByCode is the one table from an X_ code to the HTTP status the server answers with. The
// client reads the code from the body, never from the status, so the status only has to be right
// for proxies, load balancers and people with curl: 4xx is "do not send that again", 503 is "try
// again later, perhaps elsewhere", 500 is a bug.
var statusByCode = map[jobs.Code]int{
	// The request itself is wrong.
	jobs.CodeBadRequest:             http.StatusBadRequest,
	jobs.CodeEncoding:               http.StatusBadRequest,
	jobs.CodeJobIdempotencyRequired: http.StatusBadRequest,
	jobs.CodeJobTenantRequired:      http.StatusBadRequest,
	jobs.CodeJobDefinition:          http.StatusBadRequest,
	jobs.CodeUnauthorized:           http.StatusUnauthorized,
	jobs.CodePayloadTooLarge:        http.StatusRequestEntityTooLarge,
	jobs.CodeForbidden:              http.StatusForbidden,
	jobs.CodeLeaseInvalid:           http.StatusForbidden,
	jobs.CodeWorkerLive:             http.StatusConflict,
	jobs.CodeRouteNotFound:          http.StatusNotFound,
	jobs.CodeMethodNotAllowed:       http.StatusMethodNotAllowed,
	jobs.CodeJobUndeclared:          http.StatusNotFound,
	jobs.CodeQueueUndeclared:        http.StatusConflict,
	jobs.CodeHistoryStale:           http.StatusConflict,
	jobs.CodeListenFailed:           http.StatusServiceUnavailable,
	jobs.CodeOutboxNoTx:             http.StatusBadRequest,
	jobs.CodeActorInvalid:           http.StatusBadRequest,
	jobs.CodeFlowKey:                http.StatusBadRequest,
	// It names something that is not there.
	jobs.CodeRunNotFound:  http.StatusNotFound,
	jobs.CodeStepNotFound: http.StatusNotFound,
	jobs.CodeJobUnknown:   http.StatusNotFound,
	// It conflicts with the run's current state: a finished run, a stale fence.
	jobs.CodeJobNotCancellable:        http.StatusConflict,
	jobs.CodeJobNotRetryable:          http.StatusConflict,
	jobs.CodeJobLeaseLost:             http.StatusConflict,
	jobs.CodeJobSlotLost:              http.StatusConflict,
	jobs.CodeAborted:                  http.StatusConflict,
	jobs.CodeStepDuplicate:            http.StatusConflict,
	jobs.CodeStepNested:               http.StatusConflict,
	jobs.CodeReplayDiverged:           http.StatusConflict,
	jobs.CodeJobMaxAttempts:           http.StatusConflict,
	jobs.CodeChildFailed:              http.StatusConflict,
	jobs.CodeNotChild:                 http.StatusBadRequest,
	jobs.CodeKeyTaken:                 http.StatusConflict,
	jobs.CodeJobTenantMismatch:        http.StatusConflict,
	jobs.CodeJobConcurrencyUnenforced: http.StatusConflict,
	jobs.CodeBackfillApplied:          http.StatusConflict,
	jobs.CodeBackfillLive:             http.StatusConflict,
	jobs.CodeBackfillEnvironment:      http.StatusConflict,
	jobs.CodeBackfillMigrationPending: http.StatusConflict,
	jobs.CodeBackfillStalled:          http.StatusConflict,
	jobs.CodeBackfillPending:          http.StatusConflict,
	// Come back later.
	jobs.CodeRateLimited:       http.StatusTooManyRequests,
	jobs.CodeOverloaded:        http.StatusServiceUnavailable,
	jobs.CodeDraining:          http.StatusServiceUnavailable,
	jobs.CodeStoreUnavailable:  http.StatusServiceUnavailable,
	jobs.CodeCommitUnknown:     http.StatusServiceUnavailable,
	jobs.CodeDriverUnavailable: http.StatusServiceUnavailable,
	jobs.CodeStoreLocked:       http.StatusServiceUnavailable,
	jobs.CodeEngineUnreachable: http.StatusBadGateway,
	jobs.CodeTimeout:           http.StatusGatewayTimeout,
	jobs.CodeStepTimeout:       http.StatusGatewayTimeout,
	// The scheduler: an unknown schedule or none running; a fire refused by the leader lease.
	jobs.CodeScheduleNotFound:  http.StatusNotFound,
	jobs.CodeNoScheduler:       http.StatusNotFound,
	jobs.CodeScheduleNotLeader: http.StatusConflict,
	jobs.CodeScheduleConflict:  http.StatusConflict,
	// A run waited for was cancelled (the long-poll itself answers 200 with the outcome).
	jobs.CodeRunCancelled: http.StatusConflict,
	// A bug on this side.
	jobs.CodeInvariant: http.StatusInternalServerError,
	jobs.CodeInternal:  http.StatusInternalServerError,
}

// StatusOf returns the HTTP status the server answers a refusal with code c. A code the table
// does not hold (an app's own code that reached the API) is a bad request: it came from the
// caller's data, not from a bug here.
func StatusOf(c jobs.Code) int {
	if s, ok := statusByCode[c]; ok {
		return s
	}
	return http.StatusBadRequest
}

// codeOfStatus is the reverse, for a response whose body carries no code (a proxy's 502 page, a
// body cut short, another server at the address). It errs towards codes the worker retries.
func codeOfStatus(status int) jobs.Code {
	switch status {
	case http.StatusNotFound:
		// The engine answers a path it does not serve with a coded body, so an uncoded 404 comes
		// from something else at the address: the client's wiring is wrong, not the request.
		// X_BAD_REQUEST would blame the request, and an outbox relay sets a row refused so aside
		// for good: one wrong address would empty the outbox into the failed list.
		return jobs.CodeRouteNotFound
	case http.StatusMethodNotAllowed:
		// As for 404: the engine's own 405 carries X_METHOD_NOT_ALLOWED in its body.
		return jobs.CodeMethodNotAllowed
	case http.StatusUnauthorized:
		return jobs.CodeUnauthorized
	case http.StatusForbidden:
		return jobs.CodeForbidden
	case http.StatusRequestEntityTooLarge:
		return jobs.CodePayloadTooLarge
	case http.StatusTooManyRequests:
		return jobs.CodeRateLimited
	case http.StatusBadGateway, http.StatusServiceUnavailable, http.StatusGatewayTimeout:
		return jobs.CodeStoreUnavailable
	}
	if status >= 500 {
		return jobs.CodeInternal
	}
	return jobs.CodeBadRequest
}

// retryAfterHeader renders a refusal's delay for the Retry-After header, in whole seconds
// rounded up (the header has no finer unit; rounding down would invite a too-early retry).
func retryAfterHeader(d time.Duration) string {
	s := int64((d + time.Second - 1) / time.Second)
	return strconv.FormatInt(max(s, 1), 10)
}

// parseRetryAfter reads a Retry-After header in seconds; dates are not sent by this server.
func parseRetryAfter(h string) time.Duration {
	n, err := strconv.ParseInt(h, 10, 64)
	if err != nil || n <= 0 || n > 365*24*3600 {
		return 0
	}
	return time.Duration(n) * time.Second
}
