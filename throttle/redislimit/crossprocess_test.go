package redislimit

const workerEnv = "REDISLIMIT_TEST_WORKER"

func worker() int { return 0 }
