#!/usr/bin/env python3
"""A stand-in device plugin: offers N fake devices of one extended resource to one
kubelet through the kubelet's real device-plugin API (v1beta1, gRPC on a Unix socket).

It registers through the kubelet's plugin watcher (a socket in the kubelet's
`plugins_registry` directory answering `pluginregistration.Registration`), not the
older `Register` call on `/var/lib/kubelet/device-plugins/kubelet.sock`: that path is
fixed, so the harness's kubelets, which share one machine, would share it.

The machines the e2e cluster runs on have no SR-IOV virtual functions. What a benchmark
asking for VFs depends on is the resource path, not the VF: the kubelet advertising the
resource in the node's allocatable, the scheduler (Volcano) counting it for the gang,
and the kubelet calling Allocate for each container that got one. This plugin makes the
kubelet do all of that for real, with devices that are only names.

Every Allocate is printed as one line, `allocate <node> <container's device ids>`, so a
test can see which node's devices went to which benchmark.

The messages are few and small, so they are encoded here by hand (protobuf's wire
format) instead of generating code from api.proto: the only dependency is grpcio.

    stand_in_device_plugin.py --registry-dir DIR --plugin-dir DIR --resource NAME \
        --devices N --node NODE
"""

import argparse
import os
import sys
import threading
import time
from concurrent import futures

import grpc

API_VERSION = "v1beta1"


# ---------------------------------------------------------------- protobuf wire format


def varint(value):
    out = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        if value:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def field(number, payload):
    """A length-delimited field (string, bytes or message)."""
    if isinstance(payload, str):
        payload = payload.encode()
    return varint(number << 3 | 2) + varint(len(payload)) + payload


def fields(data):
    """(number, wire type, value) of each field of a message; value is bytes for
    length-delimited fields and an int for varints."""
    offset = 0

    def read_varint():
        nonlocal offset
        shift = result = 0
        while True:
            if offset >= len(data):
                raise ValueError("truncated varint")
            byte = data[offset]
            offset += 1
            result |= (byte & 0x7F) << shift
            if not byte & 0x80:
                return result
            shift += 7

    while offset < len(data):
        key = read_varint()
        number, wire = key >> 3, key & 7
        if wire == 0:
            yield number, wire, read_varint()
        elif wire == 2:
            length = read_varint()
            yield number, wire, data[offset:offset + length]
            offset += length
        elif wire == 1:
            offset += 8
        elif wire == 5:
            offset += 4
        else:
            raise ValueError(f"wire type {wire}")


def allocate_requests(data):
    """AllocateRequest → the device ids of each ContainerAllocateRequest."""
    return [[value.decode() for number, _, value in fields(container) if number == 1]
            for number, _, container in fields(data) if number == 1]


def allocate_response(containers, node):
    """One ContainerAllocateResponse per container, each with the env variable
    PERFSWEEP_E2E_VF naming its devices (map entries are messages of key 1, value 2)."""
    out = b""
    for ids in containers:
        env = field(1, "PERFSWEEP_E2E_VF") + field(2, ",".join(ids))
        node_env = field(1, "PERFSWEEP_E2E_VF_NODE") + field(2, node)
        out += field(1, field(1, env) + field(1, node_env))
    return out


def list_and_watch_response(ids):
    return b"".join(field(1, field(1, i) + field(2, "Healthy")) for i in ids)


def plugin_info(resource, endpoint):
    """PluginInfo: type, name, endpoint, supported versions."""
    return field(1, "DevicePlugin") + field(2, resource) + field(3, endpoint) + field(4, API_VERSION)


def registration_status(data):
    """RegistrationStatus → (plugin_registered, error)."""
    registered, error = False, ""
    for number, _, value in fields(data):
        if number == 1:
            registered = bool(value)
        elif number == 2:
            error = value.decode(errors="replace")
    return registered, error


# ---------------------------------------------------------------- the plugin


def log(message):
    print(f"{time.strftime('%H:%M:%S')} {message}", flush=True)


class Plugin:
    def __init__(self, args):
        self.args = args
        self.ids = [f"{args.node}-vf{i}" for i in range(args.devices)]
        name = f"perfsweep-stand-in-{args.resource.replace('/', '-')}.sock"
        self.registration = os.path.join(args.registry_dir, name)
        self.endpoint = os.path.join(args.plugin_dir, name)
        self.stopped = threading.Event()
        self.server = None

    def device_plugin(self):
        identity = {"request_deserializer": lambda b: b, "response_serializer": lambda b: b}

        def options(_request, _context):
            return b""

        def list_and_watch(_request, context):
            yield list_and_watch_response(self.ids)
            # The kubelet keeps this stream open; the devices never change.
            while context.is_active() and not self.stopped.wait(1):
                pass

        def allocate(request, _context):
            containers = allocate_requests(request)
            for ids in containers:
                log(f"allocate {self.args.node} {','.join(ids)}")
            return allocate_response(containers, self.args.node)

        def empty(_request, _context):
            return b""

        return grpc.method_handlers_generic_handler(f"{API_VERSION}.DevicePlugin", {
            "GetDevicePluginOptions": grpc.unary_unary_rpc_method_handler(options, **identity),
            "ListAndWatch": grpc.unary_stream_rpc_method_handler(list_and_watch, **identity),
            "GetPreferredAllocation": grpc.unary_unary_rpc_method_handler(empty, **identity),
            "Allocate": grpc.unary_unary_rpc_method_handler(allocate, **identity),
            "PreStartContainer": grpc.unary_unary_rpc_method_handler(empty, **identity),
        })

    def registration_service(self):
        identity = {"request_deserializer": lambda b: b, "response_serializer": lambda b: b}

        def get_info(_request, _context):
            return plugin_info(self.args.resource, self.endpoint)

        def notify(request, _context):
            registered, error = registration_status(request)
            log(f"the kubelet of {self.args.node}: registered={registered} {error}".rstrip())
            return b""

        return grpc.method_handlers_generic_handler("pluginregistration.Registration", {
            "GetInfo": grpc.unary_unary_rpc_method_handler(get_info, **identity),
            "NotifyRegistrationStatus": grpc.unary_unary_rpc_method_handler(notify, **identity),
        })

    def serve(self):
        """Serves both services, each on its own socket; the kubelet's plugin watcher
        finds the registration socket and dials the endpoint it names."""
        for path in (self.registration, self.endpoint):
            if os.path.exists(path):
                os.unlink(path)
        self.server = grpc.server(futures.ThreadPoolExecutor(max_workers=8))
        self.server.add_generic_rpc_handlers((self.device_plugin(), self.registration_service()))
        self.server.add_insecure_port(f"unix://{self.endpoint}")
        self.server.add_insecure_port(f"unix://{self.registration}")
        self.server.start()
        log(f"serving {self.args.resource} on {self.args.node}: {', '.join(self.ids)}")

    def stop_server(self):
        if self.server is not None:
            self.server.stop(grace=None)
            self.server = None

    def run(self):
        """Serves once the kubelet has made its plugin directory, and again if a socket
        disappears (the watcher finds the sockets again when a kubelet restarts)."""
        while True:
            if not os.path.isdir(self.args.registry_dir):
                time.sleep(1)
                continue
            if self.server is None or not (os.path.exists(self.registration) and os.path.exists(self.endpoint)):
                self.stop_server()
                self.serve()
            time.sleep(1)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--registry-dir", required=True, help="the kubelet's plugins_registry directory")
    parser.add_argument("--plugin-dir", required=True, help="where to serve the device plugin's own socket")
    parser.add_argument("--resource", required=True, help="the extended resource, e.g. perfsweep.io/e2e-vf")
    parser.add_argument("--devices", type=int, required=True)
    parser.add_argument("--node", required=True, help="the node's name, for device ids and the log")
    args = parser.parse_args()
    os.makedirs(args.plugin_dir, exist_ok=True)
    try:
        Plugin(args).run()
    except KeyboardInterrupt:
        sys.exit(0)


if __name__ == "__main__":
    main()
