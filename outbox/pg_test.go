package outbox

import "os"

func hasPostgres() bool { return os.Getenv("TEST_DATABASE_URL") != "" }
