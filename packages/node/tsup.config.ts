import { defineConfig } from "tsup"

export default defineConfig({
  entry: { index: "src/index.ts", PromiseAgent: "src/PromiseAgent.ts" },
  external: ["@musekit/models"],
  format: ["esm"],
  dts: true,
  clean: true,
  sourcemap: true,
  target: "node20"
})
