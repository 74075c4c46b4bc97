// E2E files run in name order, so the crash-recovery suite (zz-*) runs after the others: it kills
// and replaces the stack's dispatch process.
const Sequencer = require('@jest/test-sequencer').default;

class ByName extends Sequencer {
  sort(tests) {
    return [...tests].sort((a, b) => a.path.localeCompare(b.path));
  }
}

module.exports = ByName;
