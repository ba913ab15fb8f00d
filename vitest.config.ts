import { fileURLToPath } from "node:url"
import { defineConfig } from "vitest/config"

const src = (p: string) => fileURLToPath(new URL(p, import.meta.url))

export default defineConfig({
  resolve: {
    alias: [
      { find: /^@musekit\/core\/testing$/, replacement: src("./packages/core/src/testing.ts") },
      { find: /^@musekit\/core$/, replacement: src("./packages/core/src/index.ts") },
      { find: /^@musekit\/node$/, replacement: src("./packages/node/src/index.ts") },
      { find: /^@musekit\/node\/promise$/, replacement: src("./packages/node/src/PromiseAgent.ts") },
      { find: /^@musekit\/pg\/testing$/, replacement: src("./packages/pg/src/testing.ts") },
      { find: /^@musekit\/pg\/SessionCluster$/, replacement: src("./packages/pg/src/SessionCluster.ts") },
      { find: /^@musekit\/pg$/, replacement: src("./packages/pg/src/index.ts") },
      { find: /^@musekit\/models$/, replacement: src("./packages/models/src/index.ts") },
      { find: /^@musekit\/models\/openai$/, replacement: src("./packages/models/src/OpenAi.ts") },
      { find: /^@musekit\/models\/anthropic$/, replacement: src("./packages/models/src/Anthropic.ts") },
      { find: /^@musekit\/models\/google$/, replacement: src("./packages/models/src/Google.ts") },
      { find: /^@musekit\/models\/openai-compatible$/, replacement: src("./packages/models/src/OpenAiCompatible.ts") },
      { find: /^@musekit\/cli$/, replacement: src("./packages/cli/src/index.ts") },
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
    pool: "forks",
    globalSetup: ["./vitest.tmpdir.ts"]
  }
})
