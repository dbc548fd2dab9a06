! Fortran `use mpi_f08` on GPU buffers (the emulated GPU of the mpi suite), 2 ranks.
! Rank 0 sends plain integers; rank 1 receives them into device arrays through strided
! types and completes each receive with another completion call, so each f08 entry
! point must reach TEMPI (MPICH's f08 bindings call PMPI_ for these: wrap_fortran_mpich.cpp).
! A receive that bypasses TEMPI is never unpacked and its array keeps the sentinel. Then a
! persistent send from the GPU and collectives on device arrays (a datatype per peer,
! MPI_IN_PLACE). On Open MPI every call here reaches TEMPI through the entry points that
! wrap_fortran_ompi.cpp defines; a GPU buffer that bypassed TEMPI would crash the library.
program gpu_buffers_f08
  use mpi_f08
  use gpu_buffers
  implicit none
  integer :: rank, size, k, index, outcount, indices(2)
  logical :: flag
  type(MPI_Datatype) :: stride2, stride3, every2, types(2), rtypes(2)
  type(MPI_Request) :: reqs(2)
  type(MPI_Status) :: statuses(2)
  integer, pointer :: a(:), b(:)
  integer :: host(n), src(20)

  call MPI_Init()
  call MPI_Comm_rank(MPI_COMM_WORLD, rank)
  call MPI_Comm_size(MPI_COMM_WORLD, size)
  if (size /= 2) stop 'run on 2 ranks'
  call MPI_Type_vector(20, 1, 2, MPI_INTEGER, stride2)
  call MPI_Type_commit(stride2)

  src = values(20)
  if (rank == 0) then
    do k = 1, 13
      call MPI_Send(src, 20, MPI_INTEGER, 1, k, MPI_COMM_WORLD)
    end do
    call MPI_Send(src, 20, MPI_INTEGER, 1, 13, MPI_COMM_WORLD)
  else
    a => device_array(sentinel)
    call MPI_Irecv(a, 1, stride2, 0, 1, MPI_COMM_WORLD, reqs(1))
    call MPI_Wait(reqs(1), statuses(1))
    call check_strided('MPI_Wait', a, 2, 20)
    call free_device_array(a)

    a => device_array(sentinel)
    call MPI_Irecv(a, 1, stride2, 0, 2, MPI_COMM_WORLD, reqs(1))
    flag = .false.
    do while (.not. flag)
      call MPI_Test(reqs(1), flag, MPI_STATUS_IGNORE)
    end do
    call check_strided('MPI_Test', a, 2, 20)
    call free_device_array(a)

    a => device_array(sentinel)
    b => device_array(sentinel)
    call MPI_Irecv(a, 1, stride2, 0, 3, MPI_COMM_WORLD, reqs(1))
    call MPI_Irecv(b, 1, stride2, 0, 4, MPI_COMM_WORLD, reqs(2))
    call MPI_Waitall(2, reqs, MPI_STATUSES_IGNORE)
    call check_strided('MPI_Waitall (1)', a, 2, 20)
    call check_strided('MPI_Waitall (2)', b, 2, 20)
    call free_device_array(a)
    call free_device_array(b)

    a => device_array(sentinel)
    call MPI_Irecv(a, 1, stride2, 0, 5, MPI_COMM_WORLD, reqs(1))
    reqs(2) = MPI_REQUEST_NULL
    call MPI_Waitany(2, reqs, index, statuses(1))
    if (index /= 1 .or. statuses(1)%MPI_TAG /= 5) then
      print *, 'FAIL: MPI_Waitany index', index, 'tag', statuses(1)%MPI_TAG
      failures = failures + 1
    end if
    call check_strided('MPI_Waitany', a, 2, 20)
    call free_device_array(a)

    a => device_array(sentinel)
    call MPI_Irecv(a, 1, stride2, 0, 6, MPI_COMM_WORLD, reqs(2))
    reqs(1) = MPI_REQUEST_NULL
    call MPI_Waitsome(2, reqs, outcount, indices, statuses)
    if (outcount /= 1 .or. indices(1) /= 2) then
      print *, 'FAIL: MPI_Waitsome', outcount, indices(1)
      failures = failures + 1
    end if
    call check_strided('MPI_Waitsome', a, 2, 20)
    call free_device_array(a)

    a => device_array(sentinel)
    call MPI_Irecv(a, 1, stride2, 0, 7, MPI_COMM_WORLD, reqs(1))
    reqs(2) = MPI_REQUEST_NULL
    flag = .false.
    do while (.not. flag)
      call MPI_Testall(2, reqs, flag, statuses)
    end do
    call check_strided('MPI_Testall', a, 2, 20)
    call free_device_array(a)

    a => device_array(sentinel)
    call MPI_Irecv(a, 1, stride2, 0, 8, MPI_COMM_WORLD, reqs(2))
    flag = .false.
    do while (.not. flag)
      call MPI_Testany(2, reqs, index, flag, MPI_STATUS_IGNORE)
    end do
    if (index /= 2) then
      print *, 'FAIL: MPI_Testany index', index
      failures = failures + 1
    end if
    call check_strided('MPI_Testany', a, 2, 20)
    call free_device_array(a)

    a => device_array(sentinel)
    call MPI_Irecv(a, 1, stride2, 0, 9, MPI_COMM_WORLD, reqs(2))
    reqs(1) = MPI_REQUEST_NULL
    outcount = 0
    do while (outcount == 0)
      call MPI_Testsome(2, reqs, outcount, indices, statuses)
    end do
    if (outcount /= 1 .or. indices(1) /= 2 .or. statuses(1)%MPI_TAG /= 9) then
      print *, 'FAIL: MPI_Testsome', outcount, indices(1), statuses(1)%MPI_TAG
      failures = failures + 1
    end if
    call check_strided('MPI_Testsome', a, 2, 20)
    call free_device_array(a)

    ! The data is in place once MPI_Request_get_status says so; the request lives on.
    a => device_array(sentinel)
    call MPI_Irecv(a, 1, stride2, 0, 10, MPI_COMM_WORLD, reqs(1))
    flag = .false.
    do while (.not. flag)
      call MPI_Request_get_status(reqs(1), flag, MPI_STATUS_IGNORE)
    end do
    call check_strided('MPI_Request_get_status', a, 2, 20)
    call MPI_Wait(reqs(1), MPI_STATUS_IGNORE)
    call free_device_array(a)

    ! Persistent: MPI_Start must pack nothing for a receive but the completion unpacks.
    a => device_array(sentinel)
    call MPI_Recv_init(a, 1, stride2, 0, 11, MPI_COMM_WORLD, reqs(1))
    call MPI_Start(reqs(1))
    call MPI_Wait(reqs(1), MPI_STATUS_IGNORE)
    call check_strided('MPI_Start', a, 2, 20)
    call MPI_Request_free(reqs(1))
    call free_device_array(a)

    ! A type freed and another created: MPICH hands out the freed handle again, and the
    ! new type must not be unpacked with the old one's plan.
    call MPI_Type_free(stride2)
    call MPI_Type_vector(20, 1, 3, MPI_INTEGER, stride3)
    call MPI_Type_commit(stride3)
    a => device_array(sentinel)
    call MPI_Irecv(a, 1, stride3, 0, 12, MPI_COMM_WORLD, reqs(1))
    call MPI_Wait(reqs(1), MPI_STATUS_IGNORE)
    call check_strided('a type that reuses a freed handle', a, 3, 20)
    call free_device_array(a)
    call MPI_Type_free(stride3)
    call MPI_Type_vector(20, 1, 2, MPI_INTEGER, stride2)
    call MPI_Type_commit(stride2)

    ! Startall of a persistent receive.
    a => device_array(sentinel)
    call MPI_Recv_init(a, 1, stride2, 0, 13, MPI_COMM_WORLD, reqs(1))
    call MPI_Startall(1, reqs)
    call MPI_Waitall(1, reqs, MPI_STATUSES_IGNORE)
    call check_strided('MPI_Startall', a, 2, 20)
    call MPI_Request_free(reqs(1))
    call free_device_array(a)

    a => device_array(sentinel)
    call MPI_Recv(a, 1, stride2, 0, 13, MPI_COMM_WORLD, MPI_STATUS_IGNORE)
    call check_strided('MPI_Recv', a, 2, 20)
    call free_device_array(a)
  end if

  ! A nonblocking send from the GPU, then a barrier: TEMPI queues the send's pack, and the
  ! barrier must post it (rank 1 waits for it in MPI_Recv before its barrier).
  if (rank == 0) then
    a => device_array(sentinel)
    host = sentinel
    host(1:40:2) = values(20)
    call upload(a, host)
    call MPI_Isend(a, 1, stride2, 1, 20, MPI_COMM_WORLD, reqs(1))
    call MPI_Barrier(MPI_COMM_WORLD)
    call MPI_Wait(reqs(1), MPI_STATUS_IGNORE)
    call free_device_array(a)
  else
    host = sentinel
    call MPI_Recv(host, 20, MPI_INTEGER, 0, 20, MPI_COMM_WORLD, MPI_STATUS_IGNORE)
    if (any(host(1:20) /= values(20))) then
      print *, 'FAIL: MPI_Isend from the GPU then MPI_Barrier', host(1:4)
      failures = failures + 1
    end if
    call MPI_Barrier(MPI_COMM_WORLD)
  end if

  ! A persistent send from the GPU, started twice.
  if (rank == 0) then
    a => device_array(sentinel)
    host = sentinel
    host(1:40:2) = values(20)
    call upload(a, host)
    call MPI_Send_init(a, 1, stride2, 1, 21, MPI_COMM_WORLD, reqs(1))
    do k = 1, 2
      call MPI_Start(reqs(1))
      call MPI_Wait(reqs(1), MPI_STATUS_IGNORE)
    end do
    call MPI_Request_free(reqs(1))
    call free_device_array(a)
  else
    do k = 1, 2
      host = sentinel
      call MPI_Recv(host, 20, MPI_INTEGER, 0, 21, MPI_COMM_WORLD, statuses(1))
      if (any(host(1:20) /= values(20)) .or. statuses(1)%MPI_TAG /= 21) then
        print *, 'FAIL: persistent send from the GPU', k, host(1:4)
        failures = failures + 1
      end if
    end do
  end if

  ! Collectives on device arrays: MPI_Bcast through a strided type,
  a => device_array(sentinel)
  if (rank == 0) then
    host = sentinel
    host(1:40:2) = values(20)
    call upload(a, host)
  end if
  call MPI_Bcast(a, 1, stride2, 0, MPI_COMM_WORLD)
  call check_strided('MPI_Bcast', a, 2, 20)
  call free_device_array(a)
  ! MPI_Alltoallw: 10 integers from the host to each peer, received every second element,
  ! the first peer's at the odd places and the second's at the even,
  call MPI_Type_vector(10, 1, 2, MPI_INTEGER, every2)
  call MPI_Type_commit(every2)
  a => device_array(sentinel)
  src = values(20)
  types = [MPI_INTEGER, MPI_INTEGER]
  rtypes = [every2, every2]
  call MPI_Alltoallw(src, [10, 10], [0, 0], types, a, [1, 1], [0, 4], rtypes, MPI_COMM_WORLD)
  host = download(a)
  if (any(host(1:20:2) /= src(1:10)) .or. any(host(2:20:2) /= src(1:10)) .or. any(host(21:n) /= sentinel)) then
    print *, 'FAIL: MPI_Alltoallw into the GPU', host(1:4)
    failures = failures + 1
  end if
  call free_device_array(a)
  call MPI_Type_free(every2)
  ! and MPI_Iallreduce in place.
  a => device_array(rank + 1)
  call MPI_Iallreduce(MPI_IN_PLACE, a, n, MPI_INTEGER, MPI_SUM, MPI_COMM_WORLD, reqs(1))
  call MPI_Wait(reqs(1), MPI_STATUS_IGNORE)
  host = download(a)
  if (any(host /= 3)) then
    print *, 'FAIL: MPI_Iallreduce in place on the GPU', host(1:4)
    failures = failures + 1
  end if
  call free_device_array(a)

  call MPI_Type_free(stride2)
  call MPI_Finalize()
  if (failures > 0) error stop 1
  if (rank == 1) print '(a)', 'PASS: use mpi_f08 on GPU buffers'
end program
