// The official Node.js Vertex AI client (@google-cloud/aiplatform) over its default transport, gRPC, on an
// insecure loopback channel (google-gax's `sslCreds` option), against a Trainworks server's --grpc-port.
// tests/system/test_node_client.py runs it and checks what it prints: one JSON object of results.
//
// Usage: node job_service.js PORT PARENT PYTHON
'use strict';

const {v1} = require('@google-cloud/aiplatform');
const {grpc} = require('google-gax');

const [port, parent, python] = process.argv.slice(2);
const LONG_RUNNING = 'import time; time.sleep(600)';

function job(displayName, code) {
  return {
    displayName,
    labels: {client: 'node'},
    jobSpec: {
      workerPoolSpecs: [
        {
          machineSpec: {machineType: 'n1-standard-4'},
          replicaCount: 1,
          containerSpec: {imageUri: 'python:3.11', command: [python, '-c', code]},
        },
      ],
    },
  };
}

// A failed call as data: its gRPC code, message and the field violations of its google.rpc.Status
// details (google-gax decodes grpc-status-details-bin into `statusDetails`).
async function failure(call) {
  try {
    await call();
  } catch (error) {
    const violations = [];
    for (const detail of error.statusDetails || []) {
      for (const v of detail.fieldViolations || []) {
        violations.push({field: v.field, description: v.description});
      }
    }
    return {code: error.code, message: error.details || error.message, violations};
  }
  return null;
}

async function waitState(client, name, wanted, seconds) {
  const deadline = Date.now() + seconds * 1000;
  for (;;) {
    const [found] = await client.getCustomJob({name});
    if (wanted.includes(String(found.state))) {
      return found;
    }
    if (Date.now() > deadline) {
      throw new Error(`${name} did not reach ${wanted} (state ${found.state})`);
    }
    await new Promise(resolve => setTimeout(resolve, 100));
  }
}

async function main() {
  const client = new v1.JobServiceClient({
    apiEndpoint: '127.0.0.1',
    port: Number(port),
    sslCreds: grpc.credentials.createInsecure(),
  });
  const out = {};
  const suffix = Math.random().toString(16).slice(2, 10);

  const [created] = await client.createCustomJob({parent, customJob: job(`node-${suffix}`, LONG_RUNNING)});
  out.created = {name: created.name, displayName: created.displayName, state: String(created.state)};

  const [got] = await client.getCustomJob({name: created.name});
  const machineType = got.jobSpec.workerPoolSpecs[0].machineSpec.machineType;
  out.got = {name: got.name, labels: got.labels, machineType};

  const [second] = await client.createCustomJob({parent, customJob: job(`node-${suffix}`, 'pass')});
  const filter = `display_name="node-${suffix}"`;
  const [listed] = await client.listCustomJobs({parent, filter});
  out.listed = listed.map(j => j.name);
  // One page at a time: the first page of one job and its token, then the rest.
  const [page, nextRequest] = await client.listCustomJobs(
    {parent, filter, pageSize: 1},
    {autoPaginate: false}
  );
  const [rest] = nextRequest ? await client.listCustomJobs(nextRequest, {autoPaginate: false}) : [[]];
  out.pages = [page.map(j => j.name), rest.map(j => j.name)];

  await waitState(client, created.name, ['JOB_STATE_RUNNING'], 60);
  await client.cancelCustomJob({name: created.name});
  const cancelled = await waitState(client, created.name, ['JOB_STATE_CANCELLED'], 60);
  out.cancelled = {state: String(cancelled.state), errorCode: cancelled.error ? cancelled.error.code : null};

  await waitState(client, second.name, ['JOB_STATE_SUCCEEDED', 'JOB_STATE_FAILED'], 60);
  const [operation] = await client.deleteCustomJob({name: second.name});
  out.deleteOperation = operation.name;
  await operation.promise();
  out.deleted = operation.done === true;
  out.afterDelete = await failure(() => client.getCustomJob({name: second.name}));

  out.notFound = await failure(() => client.getCustomJob({name: `${parent}/customJobs/999999999`}));
  const empty = job(`node-bad-${suffix}`, 'pass');
  empty.jobSpec.workerPoolSpecs = [];
  out.invalid = await failure(() => client.createCustomJob({parent, customJob: empty}));

  await client.close();
  process.stdout.write(JSON.stringify(out) + '\n');
}

main().catch(error => {
  process.stderr.write(`${error.stack || error}\n`);
  process.exit(1);
});
