import * as os from "node:os"
import { fileURLToPath } from "node:url"
import { defineConfig } from "vitest/config"

const src = (p: string) => fileURLToPath(new URL(p, import.meta.url))

export default defineConfig({
  resolve: {
    alias: [
      { find: /^@musekit\/core\/testing$/, replacement: src("./packages/core/src/testing.ts") },
      { find: /^@musekit\/node\/promise$/, replacement: src("./packages/node/src/PromiseAgent.ts") },
      { find: /^@musekit\/pg\/testing$/, replacement: src("./packages/pg/src/testing.ts") },
      { find: /^@musekit\/models\/openai$/, replacement: src("./packages/models/src/OpenAi.ts") },
      { find: /^@musekit\/models\/anthropic$/, replacement: src("./packages/models/src/Anthropic.ts") },
      { find: /^@musekit\/models\/google$/, replacement: src("./packages/models/src/Google.ts") },
      { find: /^@musekit\/models\/openai-compatible$/, replacement: src("./packages/models/src/OpenAiCompatible.ts") },
      // every other subpath export is `./*` → dist/*.js, built from src/*.ts
      { find: /^@musekit\/(core|node|pg|models|cli)\/(\w+)$/, replacement: src("./packages/$1/src/$2.ts") },
      { find: /^@musekit\/(core|node|pg|models|cli)$/, replacement: src("./packages/$1/src/index.ts") },
      { find: /^@musekit\/plugin-(\w+)\/(\w+)$/, replacement: src("./plugins/$1/src/$2.ts") },
      { find: /^@musekit\/plugin-(\w+)$/, replacement: src("./plugins/$1/src/index.ts") }
    ]
  },
  test: {
    include: [
      "packages/*/test/**/*.test.ts",
      "plugins/*/test/**/*.test.ts",
      "examples/*/test/**/*.test.ts",
      "test/*/*.test.ts"
    ],
    testTimeout: 60_000,
    hookTimeout: 60_000,
    // a worker that ends its Postgres or child processes can take more than the default 10 s to
    // exit when both cores are busy
    teardownTimeout: 60_000,
    pool: "forks",
    // Vitest's default is one worker per core but one; most files wait on processes they start, so
    // a 2-core machine runs two at once (the tests hold with both cores busy)
    maxWorkers: Math.max(2, os.availableParallelism() - 1),
    globalSetup: ["./vitest.tmpdir.ts"],
    setupFiles: ["./test/support/testFile.ts"],
    reporters: ["default", "./test/support/slowest.ts"]
  }
})
