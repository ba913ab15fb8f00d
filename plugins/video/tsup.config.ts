import { defineConfig } from "tsup"

export default defineConfig({
  // one entry per public module (`@musekit/x/Module`), so declarations elsewhere can name its types
  entry: ["src/*.ts"],
  format: ["esm"],
  // declarations come from tsc (tsconfig.build.json): one .d.ts per module with its own names, no hashed chunks
  dts: false,
  clean: true,
  sourcemap: true,
  target: "node20"
})
