package sharedquota

const helperEnv = "SHAREDQUOTA_TEST_HELPER"

func helperMain(mode string) int { return 2 }
